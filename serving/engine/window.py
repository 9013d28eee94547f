"""The recent history the refresher plans from, kept up to date with incremental fetches.

Each tick asks the source only for the grid points after the last one received for each
workload, appends them and drops what falls out of the window: the whole history is read
once, at start-up (or when the model's grid step changes), never again.

Workloads are fetched in batches: one source call per batch of workloads that share the
same start (every workload, in the steady state), the batches spread over a few worker
threads. One call per workload would cost more in per-call overhead than the points it
brings (a tick usually reads one point per workload); a handful of batches keep the sources
that answer query by query (Prometheus) working in parallel. If a batch fails, its workloads
are fetched again one by one, so one broken query does not hold the others back. Each worker
thread owns its source instance, because the Prometheus source keeps an HTTP session that
is not thread-safe.

Values the data contract refuses (:func:`forecaster.frame.validate_frame`: negative or
infinite demand, any value of :data:`~forecaster.frame.MAX_VALUE` or more in magnitude) are
kept as missing, like a NaN: left in, a few of them from a broken exporter would make every
plan of the workload fail until they slid out of the window, a week later. Missing, they
follow the rules of any gap: the last forecast is served until the data is older than
``max_staleness``, then the metric answers the hold error.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from forecaster.frame import MAX_VALUE, beyond_range
from training.sources.base import HistorySource

__all__ = ["FetchOutcome", "History", "HistorySource", "RollingWindow", "WorkloadQuery"]

logger = logging.getLogger(__name__)


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
    refused : dict of str to int
        Workload -> values received for the first time this tick that the data contract
        refuses, kept as missing.
    """

    errors: dict[str, str]
    new_points: int
    seconds: float
    refused: dict[str, int] = field(default_factory=dict)


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
        Batches fetched concurrently.
    batch_min : int, default 64
        Fewest workloads worth a batch of their own: fewer than ``2 * batch_min`` workloads
        are fetched in one call, more are split over at most ``max_workers`` calls.
    """

    def __init__(
        self,
        workloads: Sequence[WorkloadQuery],
        source_factory: Callable[[], HistorySource],
        *,
        window_seconds: float,
        step: int,
        max_workers: int = 8,
        batch_min: int = 64,
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
        self.batch_min = max(1, int(batch_min))
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._sources: list[HistorySource] = []
        self._sources_lock = threading.Lock()
        # Per workload: the last grid second received, and the kept frame part.
        self._last_fetched: dict[str, int] = {}
        # The same moments as Timestamps, made once per new point: the refresher asks for
        # them several times per workload per tick.
        self._last_stamp: dict[str, pd.Timestamp] = {}
        self._parts: dict[str, _Part] = {}
        # Per workload: the newest grid second with a refused value (the cells after the last
        # good value are asked again each tick, and each refused value is counted once), and
        # the refused values of the episode under way: from the first refused value to a good
        # one after the last, logged once.
        self._refused_until: dict[str, int] = {}
        self._episodes: dict[str, int] = {}
        self._refused_now: dict[str, int] = {}
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
    def _fetch(self, names: Sequence[str], start: int, end: int) -> pd.DataFrame:
        queries = {name: self.workloads[name].query for name in names}
        covariates = {
            name: dict(self.workloads[name].covariates)
            for name in names
            if self.workloads[name].covariates
        }
        result = self._source().fetch(
            queries,
            pd.Timestamp(start, unit="s", tz="UTC"),
            pd.Timestamp(end, unit="s", tz="UTC"),
            self.step,
            covariates=covariates or None,
        )
        frame: pd.DataFrame = result.frame
        return frame

    def _batches(self, jobs: Mapping[str, int]) -> list[tuple[list[str], int]]:
        """Group the workloads by start, then cut each group into at most ``max_workers``."""
        by_start: dict[int, list[str]] = {}
        for name, start in jobs.items():
            by_start.setdefault(start, []).append(name)
        batches: list[tuple[list[str], int]] = []
        for start, names in by_start.items():
            count = max(1, min(self.max_workers, len(names) // self.batch_min))
            size = math.ceil(len(names) / count)
            batches.extend((names[i : i + size], start) for i in range(0, len(names), size))
        return batches

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
        self._refused_now = {}
        if jobs:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="fetch")
            pool = self._pool
            batches = self._batches(jobs)
            futures = [
                (names, start, pool.submit(self._fetch, names, start, end))
                for names, start in batches
            ]
            retry: list[tuple[str, Future[pd.DataFrame]]] = []
            for names, start, future in futures:
                try:
                    frame = future.result()
                except Exception as exc:
                    if len(names) == 1:
                        errors[names[0]] = f"{type(exc).__name__}: {exc}"
                    else:  # find out which workloads failed: each one alone
                        retry.extend(
                            (name, pool.submit(self._fetch, [name], start, end)) for name in names
                        )
                    continue
                new_points += self._append_batch(names, frame)
            for name, one in retry:
                try:
                    frame = one.result()
                except Exception as exc:  # each workload fails alone
                    errors[name] = f"{type(exc).__name__}: {exc}"
                    continue
                new_points += self._append_batch([name], frame)
        for name in self.workloads:
            self._trim(name, oldest)
        seconds = (pd.Timestamp.now(tz="UTC") - clock).total_seconds()
        return FetchOutcome(
            errors=errors, new_points=new_points, seconds=seconds, refused=self._refused_now
        )

    def _append_batch(self, names: Sequence[str], frame: pd.DataFrame) -> int:
        # Columns to numpy once for the whole batch, then one slice per workload.
        times = frame["timestamp"].to_numpy(dtype="datetime64[s]").astype(np.int64)
        columns = [
            frame[c].to_numpy(dtype=float) if c in frame.columns else np.full(len(times), np.nan)
            for c in self._columns[2:]
        ]
        values = np.column_stack(columns) if len(columns) > 1 else columns[0][:, None]
        refused = _refused(values)
        if refused.any():
            bad = np.flatnonzero(refused.any(axis=1))
            owners = (
                np.full(len(bad), names[0], dtype=object)
                if len(names) == 1
                else frame["series"].to_numpy(dtype=object)[bad]
            )
            asked = set(names)
            for name in dict.fromkeys(owners.tolist()):
                if name not in asked:
                    continue
                mine = bad[owners == name]
                self._note_refused(name, times[mine], values[mine], refused[mine])
            values = np.where(refused, np.nan, values)
        if len(names) == 1:
            return self._append(names[0], times, values)
        codes, uniques = pd.factorize(frame["series"])
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(uniques) + 1))
        rows = {str(name): order[bounds[i] : bounds[i + 1]] for i, name in enumerate(uniques)}
        added = 0
        for name in names:
            picked = rows.get(name)
            if picked is not None:
                added += self._append(name, times[picked], values[picked])
        return added

    def _append(self, name: str, times: np.ndarray, values: np.ndarray) -> int:
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
        if newest != last:
            self._last_fetched[name] = newest
            self._last_stamp[name] = pd.Timestamp(newest, unit="s", tz="UTC")
        if name in self._episodes and newest > self._refused_until[name]:
            self._end_episode(name, newest)
        if last is None:
            return len(finite)
        return int(np.count_nonzero(times[finite] > last))

    def _note_refused(
        self, name: str, times: np.ndarray, values: np.ndarray, refused: np.ndarray
    ) -> None:
        """Count the refused values of ``name`` not seen before; log the first of an episode."""
        newer = times > self._refused_until.get(name, -1)
        if not newer.any():
            return
        times, values, refused = times[newer], values[newer], refused[newer]
        count = int(np.count_nonzero(refused))
        self._refused_now[name] = self._refused_now.get(name, 0) + count
        self._refused_until[name] = int(times.max())
        if name in self._episodes:
            self._episodes[name] += count
            return
        self._episodes[name] = count
        row = int(np.argmin(times))  # every row passed holds a refused value
        column = int(np.flatnonzero(refused[row])[0])
        value = float(values[row, column])
        logger.warning(
            "values the data contract refuses are kept as missing: the workload's forecast "
            "is not renewed until good values arrive, and its metric holds after max_staleness",
            extra={
                "workload": name,
                "time": pd.Timestamp(int(times[row]), unit="s", tz="UTC").isoformat(),
                "column": self._columns[2 + column],
                "value": value,
                "reason": _refusal(value, demand=column == 0),
            },
        )

    def _end_episode(self, name: str, newest: int) -> None:
        logger.info(
            "good values again after refused ones",
            extra={
                "workload": name,
                "time": pd.Timestamp(newest, unit="s", tz="UTC").isoformat(),
                "refused_values": self._episodes.pop(name),
            },
        )

    def _trim(self, name: str, oldest: int) -> None:
        part = self._parts.get(name)
        if part is None or not len(part.times) or part.times[0] >= oldest:
            return
        cut = int(np.searchsorted(part.times, oldest, side="left"))
        self._parts[name] = _Part(part.times[cut:], part.values[cut:])

    # -- reading ---------------------------------------------------------------------------
    def last_data(self, name: str) -> pd.Timestamp | None:
        """Time of the newest finite value of ``name``, or None."""
        return self._last_stamp.get(name)

    def history(self, names: Sequence[str] | None = None) -> History:
        """The kept history of ``names`` (default: all), each cut after its last value.

        Cells after a workload's newest value are dropped so that its forecast origin is the
        last point actually observed, not a trailing gap.
        """
        kept, lengths, times, values = [], [], [], []
        for name in self.workloads if names is None else names:
            part = self._parts.get(name)
            last = self._last_fetched.get(name)
            if part is None or last is None:
                continue
            n = int(np.searchsorted(part.times, last, side="right"))
            kept.append(name)
            lengths.append(n)
            times.append(part.times[:n])
            values.append(part.values[:n])
        width = len(self._columns) - 2
        return History(
            names=tuple(kept),
            lengths=np.asarray(lengths, dtype=np.int64),
            times=np.concatenate(times) if times else np.empty(0, dtype=np.int64),
            values=np.concatenate(values) if values else np.empty((0, width)),
            columns=tuple(self._columns),
        )

    def frame(self, names: Sequence[str] | None = None) -> pd.DataFrame:
        """:meth:`history` as the long frame a model plans from."""
        return self.history(names).to_frame()

    def value_at(self, name: str, moment: datetime) -> float | None:
        """The value of ``name`` at the first grid point at or after ``moment``, if received."""
        part = self._parts.get(name)
        if part is None:
            return None
        i = int(np.searchsorted(part.times, int(moment.timestamp()), side="left"))
        if i >= len(part.times):
            return None
        value = float(part.values[i, 0])
        return value if math.isfinite(value) else None


def _refused(values: np.ndarray) -> np.ndarray:
    """Cells the data contract refuses: negative demand (column 0), infinite values, values of
    :data:`~forecaster.frame.MAX_VALUE` or more in magnitude. NaN is missing, not refused."""
    refused = beyond_range(values)
    refused[:, 0] |= values[:, 0] < 0
    return refused


def _refusal(value: float, *, demand: bool) -> str:
    """Why the data contract refuses ``value``, in words."""
    if not math.isfinite(value):
        return "not finite"
    if abs(value) >= MAX_VALUE:
        return f"beyond {MAX_VALUE:g} in magnitude"
    return "negative demand" if demand and value < 0 else "refused"


@dataclass(frozen=True)
class History:
    """Several workloads' kept history as flat arrays: what crosses to the planning process.

    A long frame's ``series`` column holds one Python string per cell, and pickling it (to
    send it to the planning child) holds the interpreter lock for the whole column: at
    10,000 workloads, a few hundred milliseconds during which no request is answered. These
    arrays pickle as a few buffers and the names once.

    Attributes
    ----------
    names : tuple of str
        The workloads, in order.
    lengths : ndarray of int64
        Cells of each workload, in the same order.
    times, values : ndarray
        Every workload's cells one after the other: seconds since the epoch, and one column
        per ``columns[2:]``.
    columns : tuple of str
        The frame's columns: ``series``, ``timestamp``, then value and covariates.
    """

    names: tuple[str, ...]
    lengths: np.ndarray
    times: np.ndarray
    values: np.ndarray
    columns: tuple[str, ...]

    def to_frame(self) -> pd.DataFrame:
        """The long frame (``series``, ``timestamp``, value columns) a model plans from."""
        if not self.names:
            return pd.DataFrame(columns=list(self.columns))
        data: dict[str, Any] = {
            "series": np.repeat(np.array(self.names, dtype=object), self.lengths),
            "timestamp": pd.to_datetime(self.times, unit="s", utc=True),
        }
        for j, column in enumerate(self.columns[2:]):
            data[column] = self.values[:, j]
        return pd.DataFrame(data)

    def chunks(self, size: int) -> Iterator[History]:
        """The same history as parts of at most ``size`` workloads each, in name order: the
        parts' plans, one after the other, are sorted by name as one plan of all of them is."""
        if size < 1:
            raise ValueError(f"`size` must be at least one workload, got {size!r}")
        ends = np.cumsum(self.lengths)
        starts = ends - self.lengths
        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        for first in range(0, len(order), size):
            picked = order[first : first + size]
            yield History(
                names=tuple(self.names[i] for i in picked),
                lengths=self.lengths[picked],
                times=np.concatenate([self.times[starts[i] : ends[i]] for i in picked]),
                values=np.concatenate([self.values[starts[i] : ends[i]] for i in picked]),
                columns=self.columns,
            )


@dataclass(frozen=True)
class _Part:
    """One workload's kept cells: seconds since the epoch, and value (+ covariates) rows."""

    times: np.ndarray
    values: np.ndarray
