"""The recent history the refresher plans from, kept up to date with incremental fetches.

Each tick asks the source only for the grid points after the last one received for each
workload, appends them and drops what falls out of the window: the whole history is read
once, at start-up (or when the model's grid step changes), never again.

Workloads are fetched independently, a few at a time, so one broken query or a slow answer
for one workload does not hold the others back. Each worker thread owns its source
instance, because the Prometheus source keeps an HTTP session that is not thread-safe.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

__all__ = ["FetchOutcome", "HistorySource", "RollingWindow", "WorkloadQuery"]

logger = logging.getLogger(__name__)


class HistorySource(Protocol):
    """A source of demand history on a regular grid (``training.sources``)."""

    def fetch(
        self,
        queries: Mapping[str, str],
        start: Any,
        end: Any,
        step: int | str,
        *,
        covariates: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Any:
        """Return an object whose ``frame`` is the long frame ``series, timestamp, value``."""
        ...


@dataclass(frozen=True)
class WorkloadQuery:
    """How to read one workload's demand (and covariates) from the source.

    Parameters
    ----------
    name : str
        Workload name (the ``series`` value).
    query : str
        Demand query, e.g. PromQL returning one series.
    covariates : mapping of str to str, default {}
        Covariate column -> query.
    """

    name: str
    query: str
    covariates: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FetchOutcome:
    """What one tick's fetch did.

    Attributes
    ----------
    errors : dict of str to str
        Workload -> error message, for the workloads whose fetch failed this tick.
    new_points : int
        Grid points appended (over all workloads).
    seconds : float
        Wall time of the fetch.
    """

    errors: dict[str, str]
    new_points: int
    seconds: float


class RollingWindow:
    """The last ``window_seconds`` of every workload's history, refreshed incrementally.

    Parameters
    ----------
    workloads : sequence of WorkloadQuery
        What to fetch.
    source_factory : callable
        Returns a new source; called once per worker thread.
    window_seconds : float
        History kept per workload (at least what the model needs; the caller ensures it).
    step : int
        Grid step in seconds (the model's).
    max_workers : int, default 8
        Workloads fetched concurrently.
    """

    def __init__(
        self,
        workloads: Sequence[WorkloadQuery],
        source_factory: Callable[[], HistorySource],
        *,
        window_seconds: float,
        step: int,
        max_workers: int = 8,
    ) -> None:
        if step <= 0:
            raise ValueError(f"`step` must be positive seconds, got {step!r}")
        if window_seconds < step:
            raise ValueError(
                f"`window_seconds` must be at least one step ({step} s), got {window_seconds!r}"
            )
        self.workloads = {w.name: w for w in workloads}
        self.source_factory = source_factory
        self.window_seconds = float(window_seconds)
        self.step = int(step)
        self.max_workers = max(1, int(max_workers))
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._sources: list[HistorySource] = []
        self._sources_lock = threading.Lock()
        # Per workload: the last grid second received, and the kept frame part.
        self._last_fetched: dict[str, int] = {}
        self._parts: dict[str, _Part] = {}
        self._columns: list[str] = ["series", "timestamp", "value"]
        for w in workloads:
            for column in w.covariates:
                if column not in self._columns:
                    self._columns.append(column)

    # -- sources, one per worker thread -----------------------------------------------------
    def _source(self) -> HistorySource:
        source: HistorySource | None = getattr(self._local, "source", None)
        if source is None:
            source = self.source_factory()
            self._local.source = source
            with self._sources_lock:
                self._sources.append(source)
        return source

    def close(self) -> None:
        """Stop the worker threads and close the sources that can be closed."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        with self._sources_lock:
            sources, self._sources = self._sources, []
        for source in sources:
            close = getattr(source, "close", None)
            if callable(close):
                close()

    # -- fetching --------------------------------------------------------------------------
    def _fetch_one(self, name: str, start: int, end: int) -> pd.DataFrame:
        workload = self.workloads[name]
        covariates = {name: dict(workload.covariates)} if workload.covariates else None
        result = self._source().fetch(
            {name: workload.query},
            pd.Timestamp(start, unit="s", tz="UTC"),
            pd.Timestamp(end, unit="s", tz="UTC"),
            self.step,
            covariates=covariates,
        )
        frame: pd.DataFrame = result.frame
        return frame

    def update(self, now: pd.Timestamp) -> FetchOutcome:
        """Fetch the grid points after the last received one, up to ``now``, for every workload.

        Parameters
        ----------
        now : Timestamp
            Tz-aware current time; the last grid point fetched is ``floor(now / step)``.

        Returns
        -------
        FetchOutcome
            Per-workload errors (the other workloads are updated regardless).
        """
        clock = pd.Timestamp.now(tz="UTC")
        end = math.floor(now.timestamp() / self.step) * self.step
        oldest = end - math.floor(self.window_seconds / self.step) * self.step + self.step
        jobs: dict[str, int] = {}
        for name in self.workloads:
            last = self._last_fetched.get(name)
            start = oldest if last is None else max(oldest, last + self.step)
            if start <= end:
                jobs[name] = start
        errors: dict[str, str] = {}
        new_points = 0
        if jobs:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="fetch")
            futures = {
                name: self._pool.submit(self._fetch_one, name, start, end)
                for name, start in jobs.items()
            }
            for name, future in futures.items():
                try:
                    frame = future.result()
                except Exception as exc:  # each workload fails alone
                    errors[name] = f"{type(exc).__name__}: {exc}"
                    continue
                new_points += self._append(name, frame, end)
        for name in self.workloads:
            self._trim(name, oldest)
        seconds = (pd.Timestamp.now(tz="UTC") - clock).total_seconds()
        return FetchOutcome(errors=errors, new_points=new_points, seconds=seconds)

    def _append(self, name: str, frame: pd.DataFrame, end: int) -> int:
        # One workload per fetch, so every row is this workload's; plain numpy from here on
        # (this runs once per workload per tick).
        times = frame["timestamp"].to_numpy(dtype="datetime64[s]").astype(np.int64)
        columns = [
            frame[c].to_numpy(dtype=float) if c in frame.columns else np.full(len(times), np.nan)
            for c in self._columns[2:]
        ]
        values = np.column_stack(columns) if len(columns) > 1 else columns[0][:, None]
        last = self._last_fetched.get(name)
        old = self._parts.get(name)
        if old is not None and last is not None:
            # Cells after the last received value were a gap and have just been asked again.
            keep = old.times <= last
            after = times > last
            times = np.concatenate([old.times[keep], times[after]])
            values = np.concatenate([old.values[keep], values[after]])
        self._parts[name] = _Part(times, values)
        finite = np.flatnonzero(np.isfinite(values[:, 0]))
        if not len(finite):
            return 0
        newest = int(times[finite[-1]])
        self._last_fetched[name] = newest
        if last is None:
            return len(finite)
        return int(np.count_nonzero(times[finite] > last))

    def _trim(self, name: str, oldest: int) -> None:
        part = self._parts.get(name)
        if part is None or not len(part.times) or part.times[0] >= oldest:
            return
        cut = int(np.searchsorted(part.times, oldest, side="left"))
        self._parts[name] = _Part(part.times[cut:], part.values[cut:])

    # -- reading ---------------------------------------------------------------------------
    def last_data(self, name: str) -> pd.Timestamp | None:
        """Time of the newest finite value of ``name``, or None."""
        last = self._last_fetched.get(name)
        return None if last is None else pd.Timestamp(last, unit="s", tz="UTC")

    def frame(self, names: Sequence[str] | None = None) -> pd.DataFrame:
        """The kept history of ``names`` (default: all), each cut after its last value.

        Cells after a workload's newest value are dropped so that its forecast origin is the
        last point actually observed, not a trailing gap.
        """
        series, times, values = [], [], []
        for name in self.workloads if names is None else names:
            part = self._parts.get(name)
            last = self._last_fetched.get(name)
            if part is None or last is None:
                continue
            n = int(np.searchsorted(part.times, last, side="right"))
            series.append(np.full(n, name, dtype=object))
            times.append(part.times[:n])
            values.append(part.values[:n])
        if not series:
            return pd.DataFrame(columns=self._columns)
        stacked = np.concatenate(values)
        data: dict[str, Any] = {
            "series": np.concatenate(series),
            "timestamp": pd.to_datetime(np.concatenate(times), unit="s", utc=True),
        }
        for j, column in enumerate(self._columns[2:]):
            data[column] = stacked[:, j]
        return pd.DataFrame(data)

    def value_at(self, name: str, moment: pd.Timestamp) -> float | None:
        """The value of ``name`` at the first grid point at or after ``moment``, if received."""
        part = self._parts.get(name)
        if part is None:
            return None
        i = int(np.searchsorted(part.times, int(moment.timestamp()), side="left"))
        if i >= len(part.times):
            return None
        value = float(part.values[i, 0])
        return value if math.isfinite(value) else None


@dataclass(frozen=True)
class _Part:
    """One workload's kept cells: seconds since the epoch, and value (+ covariates) rows."""

    times: np.ndarray
    values: np.ndarray
