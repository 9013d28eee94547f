"""The ``file`` and ``replay`` sources: recorded traces behind the live-source interface.

``file`` serves CSV/Parquet files as they are, except that files recorded in different
periods are put side by side: each is moved by whole weeks so that it ends within half a
week of the latest file's end. Whole weeks keep every calendar feature (minute of day, day of
week) of every point, so a global model sees the same data either way.

``replay`` serves the same data as if it were being recorded right now. Everything moves by
one more whole number of weeks, chosen so that the replay's *present* (the files' common end
minus ``holdback``) is the latest such time at or before the clock: it lies within the week
before now. Training and backtests read up to the present, so they see the same values with
the same calendar at any hour of any day: their results do not depend on when they run.
Points after the present become visible as the clock passes them; once a file's recording
is used up it plays its last week again, so a live consumer (``prewarm serve``) always has
data up to now.

A live consumer keeps one source for as long as it runs, so :meth:`FileSource.fetch` looks
at the files first (a ``stat``: times, size, inode): a file that changed since it was read
(rows appended; a file that was missing, unreadable or invalid put back, remounted or fixed)
is read again. Files that did not change are not parsed again, and one that failed is
tried again when it changes, or after :data:`FAILED_RETRY` seconds if it does not (a read
error on a network mount changes nothing ``stat`` sees): a fetch then costs a ``stat`` per
file, not a read of each failed file, and a live consumer fetches every few seconds.
"""

from __future__ import annotations

import errno
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.frame import infer_step
from training.exceptions import SourceError
from training.sources.base import (
    Clock,
    FetchedHistory,
    TimeLike,
    grid_bounds,
    on_grid,
    utc,
    wall_clock,
)
from training.sources.file import History, load_history, read_series

logger = logging.getLogger(__name__)


WEEK = 7 * 86400
FAILED_RETRY = 60.0
"""Seconds after which a file that failed is read again though ``stat`` shows no change."""

Stamp = tuple[int, int, int, int] | None
"""A file's modification and change times (ns), size and inode; None when it cannot be
looked at. The change time moves with permissions, the inode when a file is replaced."""


SMALL_FILE_LIMIT = 1 << 20
"""The most a credential or certificate file is read of: 1 MiB (a token, a password or a PEM
bundle is a few KiB; a path set to a log or a device by mistake must not fill the memory)."""


def read_small(path: Path, limit: int = SMALL_FILE_LIMIT) -> bytes:
    """``path``'s bytes, reading no more than ``limit`` + 1 of them.

    Raises
    ------
    OSError
        When the file cannot be read, or holds more than ``limit`` bytes (``errno.EFBIG``,
        its ``strerror`` saying so): callers name the setting and the ``strerror``.
    """
    with path.open("rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes: not a file of this kind")
    return data


def stamp(path: Path) -> Stamp:
    """``path``'s :data:`Stamp`, through symlinks (a Secret volume's swapped ``..data``
    folder gives its files new inodes)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino)


@dataclass(frozen=True)
class _Parsed:
    """One workload's file as read: its stamp then, its series on the grid, and the step."""

    stamp: Stamp
    series: pd.Series
    step: int


def whole_weeks(step: int) -> int:
    """The shortest shift, in seconds, that is whole weeks and whole grid steps."""
    return math.lcm(WEEK, step)


def _align(
    series: dict[str, pd.Series], step: int, logged: dict[str, int] | None = None
) -> dict[str, pd.Series]:
    """Move each series by whole weeks to end within half a week of the latest end.

    The nearest whole week, rather than the last one before, halves what the files' common
    end can cut from the later ones. ``logged`` holds the shifts already logged (series ->
    seconds), so that reading the files again does not log the same shift again.
    """
    period = whole_weeks(step)
    latest = max(values.index[-1] for values in series.values())
    logged = {} if logged is None else logged
    out = {}
    for name, values in series.items():
        weeks = round((latest - values.index[-1]).total_seconds() / period)
        if weeks:
            shift = pd.Timedelta(seconds=weeks * period)
            if logged.get(name) != weeks * period:
                logger.info(
                    "series %s ends %s: moved by %d weeks to sit beside the latest file",
                    name,
                    values.index[-1],
                    weeks * period // WEEK,
                    extra={"workload": name, "shift_seconds": shift.total_seconds()},
                )
            values = values.copy()
            values.index = values.index + shift
        logged[name] = weeks * period
        out[name] = values
    return out


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
    timer
        Monotonic seconds, for :data:`FAILED_RETRY` (tests pass their own).
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
        timer: Callable[[], float] = time.monotonic,
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
        # Workload -> why its file could not be read: it fails alone, the others are served.
        self._failed: dict[str, str] = {}
        # The files' stamps when the cache was read, and each workload's file as parsed, so
        # that a read after a change parses again only the files that changed or had failed.
        self._stamps: dict[Path, Stamp] = {}
        self._parsed: dict[str, _Parsed] = {}
        self._shifts: dict[str, int] = {}
        self._timer = timer
        self._read_at = timer()

    def close(self) -> None:
        """Forget the parsed files (and the failures: the next read tries them again)."""
        self._cache = None
        self._failed = {}
        self._parsed = {}

    def _paths(self) -> Iterator[Path]:
        if self.files is not None:
            yield from self.files.values()
        else:
            assert self.path is not None
            yield self.path

    def _refresh(self) -> None:
        """Drop the cache when a file changed since it was read (a failed one included), or
        when one failed :data:`FAILED_RETRY` seconds ago or more."""
        if self._cache is None:
            return
        retry = bool(self._failed) and self._timer() - self._read_at >= FAILED_RETRY
        if retry or any(stamp(p) != self._stamps.get(p) for p in self._paths()):
            self._cache = None

    def _series(self) -> dict[str, pd.Series]:
        """The series this source shows now (a replay hides its future)."""
        return self._raw()

    def _raw(self) -> dict[str, pd.Series]:
        """Every series of the files, on the grid, indexed by UTC time (read once, and again
        after :meth:`_refresh` found a file changed)."""
        if self._cache is not None:
            return self._cache
        # Stamps taken before reading: a file that changes while it is read is read again.
        self._stamps = {path: stamp(path) for path in self._paths()}
        self._read_at = self._timer()
        self._step = None
        out: dict[str, pd.Series] = {}
        if self.files is not None:
            # A file that fails is not logged here: its workload's fetch raises the error,
            # which the consumer says (train's error, serve's throttled log line).
            self._failed = {}
            for workload, path in self.files.items():
                parsed = self._parse(workload, path)
                if parsed is None:
                    continue
                out[workload] = parsed.series
                self._check_step(parsed.step, path)
            if not out:
                raise SourceError(
                    "no file of the source could be read: " + "; ".join(self._failed.values())
                )
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
        assert self._step is not None
        self._cache = _align(out, self._step, self._shifts)
        return self._cache

    def _parse(self, workload: str, path: Path) -> _Parsed | None:
        """``workload``'s file as parsed when it last changed, or None after recording why it
        cannot be read."""
        stamp = self._stamps[path]
        parsed = self._parsed.get(workload)
        if parsed is not None and parsed.stamp == stamp and stamp is not None:
            return parsed
        self._parsed.pop(workload, None)
        try:
            history = self._load_one(workload, path)
        except (SourceError, DataValidationError) as exc:
            self._failed[workload] = f"workload {workload!r}: {exc}"
            return None
        parsed = _Parsed(stamp, history.frame.set_index("timestamp")["value"], history.step)
        self._parsed[workload] = parsed
        return parsed

    def _load_one(self, workload: str, path: Path) -> History:
        history = load_history(
            path, step=self.step, value_col=self.value_col, max_fill=self.max_fill
        )
        if history.frame["series"].nunique() != 1:
            raise SourceError(
                f"file {str(path)!r} of workload {workload!r} must hold one series, "
                f"got {history.frame['series'].nunique()}"
            )
        return history

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
            if workload in self._failed:
                raise SourceError(self._failed[workload])
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

    def common_end(self) -> pd.Timestamp:
        """The latest time at which every series has been recorded (the earliest end)."""
        return min(values.index[-1] for values in self._raw().values())

    def default_end(self, step: int) -> pd.Timestamp:
        """Where training ends by default: :meth:`common_end`, so no series ends early."""
        return self.common_end()

    def window(
        self, step: int | None, lookback: int | None
    ) -> tuple[pd.Timestamp, pd.Timestamp, int]:
        """From the first recorded cell (or ``lookback`` before the end) to
        :meth:`default_end`, on the files' grid unless ``step`` is given."""
        step = step or self.data_step
        end = self.default_end(step)
        first = self.span()[0]
        start = first if lookback is None else max(first, end - pd.Timedelta(seconds=lookback))
        return start, end, step

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: int | str,
        *,
        covariates: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FetchedHistory:
        """Each workload's series over ``[start, end]``; ``step`` must be the files' step.

        Files that failed to read, or changed since they were read, are read (again) first.
        """
        self._refresh()
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
    """A :class:`FileSource` moved by whole weeks so that its present is within the last week.

    The present is the files' common end (the earliest of their ends) minus ``holdback``,
    moved by the largest whole number of weeks that keeps it at or before the clock.

    Parameters
    ----------
    holdback
        Seconds of recording after the present; they become visible as time passes.
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
        self.clock = clock or wall_clock
        self._shift: pd.Timedelta | None = None

    def _now(self) -> pd.Timestamp:
        return utc(self.clock(), "clock()")

    @property
    def shift(self) -> pd.Timedelta:
        """Added to every timestamp of the files: whole weeks, fixed at the first use."""
        if self._shift is None:
            period = whole_weeks(self.data_step)
            weeks = (self._now() - self._recorded_present()).total_seconds() // period
            self._shift = pd.Timedelta(seconds=weeks * period)
            logger.info(
                "replay: the files' present is %s",
                self.present,
                extra={"shift_seconds": self._shift.total_seconds()},
            )
        return self._shift

    def _recorded_present(self) -> pd.Timestamp:
        """The present in the files' own time: their common end minus ``holdback``."""
        return self.common_end() - pd.Timedelta(seconds=self.holdback)

    @property
    def present(self) -> pd.Timestamp:
        """The replay's present: the files' common end minus ``holdback``, moved."""
        return self._recorded_present() + self.shift

    def _series(self) -> dict[str, pd.Series]:
        now = self._now()
        step = pd.Timedelta(seconds=self.data_step)
        period = pd.Timedelta(seconds=whole_weeks(self.data_step))
        out = {}
        for workload, values in self._raw().items():
            moved = values.copy()
            moved.index = moved.index + self.shift
            end = moved.index[-1]
            if now > end and end - moved.index[0] >= period:
                # Used up: play the last week again, as often as needed to reach now.
                tail = pd.date_range(end + step, now.floor(step), freq=step)
                laps = np.ceil((tail - end) / period)
                again = pd.Series(moved.reindex(tail - laps * period).to_numpy(), index=tail)
                moved = pd.concat([moved, again])
            out[workload] = moved[moved.index <= now]
        return out

    def default_end(self, step: int) -> pd.Timestamp:
        """The replay's present (see :attr:`present`), on the grid of ``step``."""
        return self.present.floor(f"{step}s")
