"""The ``file`` and ``replay`` sources: recorded traces behind the live-source interface.

``file`` serves a CSV/Parquet file as it is. ``replay`` serves the same data as if it were
being recorded right now: every timestamp is shifted by a whole number of steps so that the
file's end minus ``holdback`` falls on the current time, and a point is visible only once
its shifted time has passed. Demos and serving tests get a live-looking source from a trace,
and the held-back tail arrives step by step as the clock advances.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError
from forecaster.frame import infer_step
from training.exceptions import SourceError
from training.sources.base import FetchedHistory, grid_bounds, on_grid, utc
from training.sources.file import load_history, read_series
from training.sources.prometheus import TimeLike

logger = logging.getLogger(__name__)

Clock = Callable[[], pd.Timestamp]


def _now() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC")


class FileSource:
    """Workload histories read from one long file or one file per workload.

    Parameters
    ----------
    path
        A long file with a series column (or a single-series file); a workload's query is
        the name of its series in the file.
    files
        ``{workload: path}``, one single-series file per workload (exclusive with ``path``).
    value_col
        Column holding the demand (default: detected).
    step
        Grid step in seconds; ``None`` uses the data's own.
    max_fill
        Longest gap, in cells, that is interpolated when the data is put on the grid.
    """

    name: ClassVar[str] = "file"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        files: Mapping[str, str | Path] | None = None,
        value_col: str | None = None,
        step: int | None = None,
        max_fill: int = 3,
    ) -> None:
        if (path is None) == (files is None):
            raise ConfigError("give exactly one of `path` and `files`")
        self.path = None if path is None else Path(path)
        self.files = None if files is None else {k: Path(v) for k, v in files.items()}
        self.value_col = value_col
        self.step = step
        self.max_fill = max_fill
        self._cache: dict[str, pd.Series] | None = None
        self._step: int | None = None

    def close(self) -> None:
        """Forget the parsed files."""
        self._cache = None

    def _series(self) -> dict[str, pd.Series]:
        """The series this source shows now (a replay hides its future)."""
        return self._raw()

    def _raw(self) -> dict[str, pd.Series]:
        """Every series of the files, on the grid, indexed by UTC time (read once)."""
        if self._cache is not None:
            return self._cache
        out: dict[str, pd.Series] = {}
        if self.files is not None:
            for workload, path in self.files.items():
                history = load_history(
                    path, step=self.step, value_col=self.value_col, max_fill=self.max_fill
                )
                if history.frame["series"].nunique() != 1:
                    raise SourceError(
                        f"file {str(path)!r} of workload {workload!r} must hold one series, "
                        f"got {history.frame['series'].nunique()}"
                    )
                out[workload] = history.frame.set_index("timestamp")["value"]
                self._check_step(history.step, path)
        else:
            assert self.path is not None
            frame = read_series(self.path, value_col=self.value_col)
            step = self.step or infer_step(frame)
            history = load_history(
                self.path, step=step, value_col=self.value_col, max_fill=self.max_fill
            )
            self._check_step(history.step, self.path)
            for name, part in history.frame.groupby("series", sort=False):
                out[str(name)] = part.set_index("timestamp")["value"]
        self._cache = out
        return out

    def _check_step(self, step: int, path: Path) -> None:
        if self._step is not None and step != self._step:
            raise SourceError(
                f"files have different steps: {str(path)!r} has {step}s, earlier ones "
                f"{self._step}s; set `step` to put them on one grid"
            )
        self._step = step

    @property
    def data_step(self) -> int:
        """Grid step of the files in seconds."""
        self._raw()
        assert self._step is not None
        return self._step

    def _lookup(self, queries: Mapping[str, str]) -> dict[str, pd.Series]:
        available = self._series()
        chosen = {}
        for workload, query in queries.items():
            key = workload if self.files is not None else query
            if key not in available:
                if self.files is None and len(available) == 1 and len(queries) == 1:
                    key = next(iter(available))  # one series, one workload: no name needed
                else:
                    where = self.path if self.files is None else self.files.get(workload)
                    raise SourceError(
                        f"workload {workload!r}: series {query!r} is not in {str(where)!r}; "
                        f"series there: {sorted(available)[:10]}"
                    )
            chosen[workload] = available[key]
        return chosen

    def span(self) -> tuple[pd.Timestamp, pd.Timestamp]:
        """First and last visible timestamp over every series."""
        series = self._series().values()
        return min(s.index[0] for s in series), max(s.index[-1] for s in series)

    def default_end(self, step: int) -> pd.Timestamp:
        """The last timestamp of the files (the latest of all series)."""
        return max(series.index[-1] for series in self._raw().values())

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: int | str,
        *,
        covariates: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FetchedHistory:
        """Each workload's series over ``[start, end]``; ``step`` must be the files' step."""
        if covariates and any(covariates.values()):
            raise ConfigError("file sources carry no covariates; remove `covariates`")
        step_s = parse_duration(step, name="step")
        if step_s != self.data_step:
            raise ConfigError(
                f"`step` {step_s}s differs from the files' grid of {self.data_step}s; "
                "set the source's `step` to resample"
            )
        first, last = grid_bounds(start, end, step_s)
        return on_grid(self._lookup(queries), queries, first, last, step_s)


class ReplaySource(FileSource):
    """A :class:`FileSource` shifted so that its end minus ``holdback`` is now.

    Each series is shifted on its own, by a whole number of steps, so traces recorded in
    different years all end ``holdback`` after now.

    Parameters
    ----------
    holdback
        Seconds of the file's tail kept in the future; they become visible as time passes.
    clock
        Returns the current UTC time (tests pass a fixed or advancing clock).
    *args, **kwargs
        As for :class:`FileSource`.
    """

    name: ClassVar[str] = "replay"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        holdback: int = 0,
        clock: Clock | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(path, **kwargs)  # type: ignore[arg-type]
        if holdback < 0:
            raise ConfigError(f"`holdback` must be >= 0 seconds, got {holdback!r}")
        self.holdback = holdback
        self.clock = clock or _now
        self._shifts: dict[str, pd.Timedelta] | None = None

    @property
    def shifts(self) -> dict[str, pd.Timedelta]:
        """Added to each series' timestamps; fixed at the first use, whole numbers of steps."""
        if self._shifts is None:
            step = self.data_step
            now = utc(self.clock(), "clock()").floor(f"{step}s")
            target = now + pd.Timedelta(seconds=self.holdback)
            self._shifts = {
                workload: pd.Timedelta(
                    seconds=(target - values.index[-1]).total_seconds() // step * step
                )
                for workload, values in self._raw().items()
            }
            logger.info(
                "replay shifts each file so that its end is %s",
                target,
                extra={"shift_seconds": {k: v.total_seconds() for k, v in self._shifts.items()}},
            )
        return self._shifts

    def _series(self) -> dict[str, pd.Series]:
        now = utc(self.clock(), "clock()")
        out = {}
        for workload, values in self._raw().items():
            moved = values.copy()
            moved.index = moved.index + self.shifts[workload]
            out[workload] = moved[moved.index <= now]
        return out

    def default_end(self, step: int) -> pd.Timestamp:
        """Now, floored to the grid."""
        return utc(self.clock(), "clock()").floor(f"{step}s")
