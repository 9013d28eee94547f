"""A regularized long frame as numpy arrays: the shape the feature builder and models work on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.frame import DEFAULT_COLUMNS, Columns

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
        ordered = frame.sort_values([columns.id_col, columns.time_col], kind="stable")
        names, starts, values = [], [], []
        covs: dict[str, list[np.ndarray]] = {c: [] for c in covariates}
        for name, part in ordered.groupby(columns.id_col, sort=True):
            seconds = part[columns.time_col].to_numpy(dtype="datetime64[ns]").astype(np.int64)
            seconds //= NS
            gaps = np.diff(seconds)
            if len(gaps) and (gaps != step).any():
                bad = int(np.flatnonzero(gaps != step)[0])
                raise DataValidationError(
                    f"series {name!r} is not on a regular grid of {step}s: "
                    f"{pd.Timestamp(seconds[bad], unit='s', tz='UTC')} is followed by "
                    f"{pd.Timestamp(seconds[bad + 1], unit='s', tz='UTC')}; regularize it first"
                )
            names.append(str(name))
            starts.append(seconds[0])
            values.append(part[columns.target_col].to_numpy(dtype=float))
            for c in covariates:
                covs[c].append(part[c].to_numpy(dtype=float))
        return cls(
            step=step,
            names=tuple(names),
            starts=np.asarray(starts, dtype=np.int64),
            values=tuple(values),
            covariates={c: tuple(v) for c, v in covs.items()},
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
