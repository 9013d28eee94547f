"""A regularized long frame as numpy arrays: the shape the feature builder and models work on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.frame import DEFAULT_COLUMNS, Columns, sorted_by_series

NS = 1_000_000_000


@dataclass(frozen=True)
class Panel:
    """Series on one regular grid.

    Attributes
    ----------
    step
        Grid step in seconds.
    names
        Series ids, in the order of ``values``.
    starts
        Unix seconds of each series' first grid cell.
    values
        One float array per series (NaN marks a missing cell).
    covariates
        Covariate name -> one float array per series, aligned with ``values``.
    """

    step: int
    names: tuple[str, ...]
    starts: np.ndarray
    values: tuple[np.ndarray, ...]
    covariates: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        step: int,
        *,
        columns: Columns = DEFAULT_COLUMNS,
        covariates: Sequence[str] = (),
    ) -> Panel:
        """Build a panel from a frame that is already on a grid of ``step`` seconds.

        Raises
        ------
        DataValidationError
            If a series is not on the grid (call :func:`forecaster.frame.regularize` first).
        """
        ordered = frame
        if not sorted_by_series(frame[columns.id_col], frame[columns.time_col]):
            ordered = frame.sort_values([columns.id_col, columns.time_col], kind="stable")
        ids = ordered[columns.id_col].to_numpy()
        seconds = ordered[columns.time_col].to_numpy(dtype="datetime64[ns]").astype(np.int64) // NS
        # One pass over the sorted cells, not a pandas group per series: serving plans 10,000
        # series a refresh. A series runs from one id change to the next.
        first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.empty(0, int)
        gaps = np.diff(seconds)
        off_grid = np.flatnonzero(gaps != step)
        off_grid = off_grid[~np.isin(off_grid + 1, first)]  # a new series is no gap
        if len(off_grid):
            bad = int(off_grid[0])
            raise DataValidationError(
                f"series {str(ids[bad])!r} is not on a regular grid of {step}s: "
                f"{pd.Timestamp(seconds[bad], unit='s', tz='UTC')} is followed by "
                f"{pd.Timestamp(seconds[bad + 1], unit='s', tz='UTC')}; regularize it first"
            )

        def split(column: str) -> tuple[np.ndarray, ...]:
            # The series never share memory with the caller's frame (a sorted one is our own).
            cells = ordered[column].to_numpy(dtype=float, copy=ordered is frame)
            return tuple(np.split(cells, first[1:])) if len(first) else ()

        return cls(
            step=step,
            names=tuple(str(name) for name in ids[first]),
            starts=seconds[first],
            values=split(columns.target_col),
            covariates={c: split(c) for c in covariates},
        )

    def subset(self, series: Sequence[int] | np.ndarray) -> Panel:
        """The panel of series numbers ``series`` only, in that order (arrays shared)."""
        picked = [int(s) for s in series]
        return Panel(
            step=self.step,
            names=tuple(self.names[s] for s in picked),
            starts=self.starts[picked],
            values=tuple(self.values[s] for s in picked),
            covariates={c: tuple(v[s] for s in picked) for c, v in self.covariates.items()},
        )

    def times(self, series: int, index: np.ndarray) -> np.ndarray:
        """Unix seconds of grid cells ``index`` of series number ``series``."""
        return self.starts[series] + np.asarray(index, dtype=np.int64) * self.step

    def index_of(self, series: int, seconds: np.ndarray) -> np.ndarray:
        """Grid cells of Unix seconds ``seconds``; raises if one is off the grid."""
        offset = np.asarray(seconds, dtype=np.int64) - self.starts[series]
        if (offset % self.step != 0).any():
            bad = int(np.asarray(seconds)[offset % self.step != 0][0])
            raise DataValidationError(
                f"origin {pd.Timestamp(bad, unit='s', tz='UTC')} is not on the {self.step}s grid "
                f"of series {self.names[series]!r}"
            )
        return offset // self.step
