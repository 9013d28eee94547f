"""The background refresher: recent data in, one batched plan, a new snapshot out.

Every ``refresh_interval`` the refresher

1. swaps in the model version the watcher has loaded, if any, only after it has planned
   successfully on the current data (:class:`~serving.engine.models.ModelWatcher`, which reads
   the registry in a thread of its own: a registry outage never holds a refresh up);
2. fetches the grid points that arrived since the last tick
   (:class:`~serving.engine.window.RollingWindow`);
3. plans every workload in **one** batch (one call of the model per
   :data:`~serving.engine.planner.PLAN_CHUNK` workloads), each with the policy registered with
   the model version; a workload whose config disagrees with that policy is refused
   (:mod:`serving.engine.drift`), the others are served;
4. checks every value (finite, ``>= 0``, replicas clamped to ``[min, max]``), and publishes
   an immutable :class:`~serving.engine.snapshot.Snapshot`.

A workload whose fetch or plan fails keeps its last good forecast: it is served until its
data is older than ``max_staleness``, then answers 503. Nothing here ever replaces a failure
by a number.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from forecaster.capacity import check_plan, check_plan_row
from forecaster.workload import WorkloadPolicy
from serving.engine import heap
from serving.engine.drift import policy_drift
from serving.engine.models import ModelWatcher
from serving.engine.observability import REFUSAL_LOG_INTERVAL, ServingMetrics, Throttle
from serving.engine.planner import ProcessPlanner, plan_history
from serving.engine.snapshot import Snapshot, SnapshotStore, WorkloadForecast, WorkloadState
from serving.engine.window import (
    FetchOutcome,
    History,
    HistorySource,
    RollingWindow,
    WorkloadQuery,
)
from serving.settings import RefreshConfig
from training.redaction import redact
from training.registry import LoadedModel, PlanningModel

__all__ = ["SWITCH_INTERVAL", "Refresher", "empty_snapshot", "freeze_long_lived"]

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

SWITCH_INTERVAL = 0.001
"""Seconds a running thread keeps the interpreter lock while another waits for it
(:func:`sys.setswitchinterval`; Python's default is 0.005), while the refresh loop runs.
During a refresh, the refresher's thread runs Python code for about a second at 10,000
workloads, and the event loop must win the lock back after every socket call: at 5 ms a
turn, each request waits several turns. Measured at 10,000 workloads refreshed every 15 s
(``benchmarks/serving_latency.py``), p99 while refreshing went from about 40 ms to 23 ms at
the same throughput; without a refresh under way, only one thread runs and nothing changes.
"""


def empty_snapshot(config: RefreshConfig, *, shadow: bool = False) -> Snapshot:
    """The snapshot served before the first refresh: every workload known, none forecast."""
    return Snapshot(
        states={
            w.name: WorkloadState(w.name, problem="no forecast yet: waiting for the first refresh")
            for w in config.workloads
        },
        max_staleness=config.serving.max_staleness,
        shadow=shadow,
    )


class Refresher:
    """Keeps the :class:`SnapshotStore` current.

    Parameters
    ----------
    config : RefreshConfig
        Workloads and intervals.
    source_factory : callable
        Returns a new history source (one is made per fetch thread).
    watcher : ModelWatcher
        Provides the model to plan with.
    store : SnapshotStore
        Where snapshots are published.
    metrics : ServingMetrics or None
        Where refresh durations, errors and accuracy are recorded.
    shadow : bool, default False
        Publish shadow snapshots (planned, exported, never served).
    """

    def __init__(
        self,
        config: RefreshConfig,
        source_factory: Callable[[], HistorySource],
        watcher: ModelWatcher,
        store: SnapshotStore[Any],
        metrics: ServingMetrics | None = None,
        *,
        shadow: bool = False,
    ) -> None:
        self.config = config
        self.shadow = shadow
        self.source_factory = source_factory
        self.watcher = watcher
        self.store = store
        self.metrics = metrics
        self.workloads = config.by_name()
        self.window: RollingWindow | None = None
        self.last_tick_seconds: float | None = None
        self.ticks = 0
        self._pending: dict[str, deque[tuple[datetime, float, float]]] = {
            name: deque(maxlen=1024) for name in self.workloads
        }
        self._fresh: dict[str, bool] = {}
        # The config never changes, so drift only changes with the served model version.
        self._drift_of: tuple[LoadedModel[PlanningModel], dict[str, str]] | None = None
        self.planner = ProcessPlanner() if config.plan_in_process else None
        self._fetch_log = Throttle(REFUSAL_LOG_INTERVAL)
        if metrics is not None:
            for name in self.workloads:
                metrics.track(name)

    # -- window ----------------------------------------------------------------------------
    def _window_for(self, model: PlanningModel) -> RollingWindow:
        step = int(model.step)
        needed = (int(model.history_cells_needed) + 2) * step
        seconds = max(self.config.serving.history_window or 0.0, needed)
        current = self.window
        if current is not None and current.step == step and current.window_seconds >= seconds:
            return current
        return RollingWindow(
            [WorkloadQuery(w.name, w.query, w.covariates) for w in self.config.workloads],
            self.source_factory,
            window_seconds=seconds,
            step=step,
            max_workers=self.config.serving.fetch_workers,
        )

    def _adopt(self, window: RollingWindow) -> None:
        if window is not self.window:
            if self.window is not None:
                self.window.close()
            self.window = window

    def _plannable(self, model: PlanningModel, window: RollingWindow) -> list[str]:
        known = set(model.workloads)
        return [
            name for name in self.workloads if name in known and window.last_data(name) is not None
        ]

    # -- model validation ------------------------------------------------------------------
    def _validate(self, candidate: LoadedModel[PlanningModel]) -> None:
        model = candidate.model
        step = getattr(model, "step", None)
        if not (isinstance(step, int) and step > 0):
            raise ValueError(f"model `step` must be positive whole seconds, got {step!r}")
        cells = getattr(model, "history_cells_needed", None)
        if not (isinstance(cells, int) and cells >= 1):
            raise ValueError(f"model `history_cells_needed` must be an int >= 1, got {cells!r}")
        if not set(model.workloads) & set(self.workloads):
            raise ValueError(
                f"model knows none of the served workloads: it has {sorted(model.workloads)[:10]}, "
                f"serving {sorted(self.workloads)[:10]}"
            )
        window = self._window_for(model)
        if window is not self.window:
            self._count_refused(window.update(pd.Timestamp.now(tz="UTC")))
        names = self._plannable(model, window)
        if names:
            plan = plan_history(model, window.history(names))
            check_plan(plan, names)
        self._adopt(window)

    # -- one tick --------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> Snapshot:
        """Run one refresh synchronously and publish its snapshot.

        Parameters
        ----------
        now : datetime or None
            The refresh time (tz-aware); default the current time.

        Returns
        -------
        Snapshot
            The published snapshot.
        """
        started = time.perf_counter()
        previous = self.store.current
        served = self.watcher.adopt(self._validate)
        # Only now: validating a new version may have fetched and planned for a while, and
        # points that arrived meanwhile are this tick's to fetch.
        now = now or datetime.now(UTC)
        problems: dict[str, str] = {}
        forecasts: dict[str, WorkloadForecast] = {}
        drift: dict[str, str] = {}
        window = self.window
        if served is None:
            reason = self.watcher.last_error or f"no model {self.config.model_name!r} loaded yet"
            problems = dict.fromkeys(self.workloads, reason)
        else:
            if self.metrics is not None:
                self.metrics.set_model(served.name, served.version)
            window = self._window_for(served.model)
            self._adopt(window)
            outcome = window.update(pd.Timestamp(now))
            self._count_refused(outcome)
            if self.metrics is not None:
                self.metrics.fetch_duration.observe(outcome.seconds)
            failed: dict[str, list[str]] = {}
            for name, error in outcome.errors.items():
                # The reason is answered with every 503, listed on /readyz and logged: a
                # source's error may quote its URL with user:password@ or a token.
                text = redact(error)
                problems[name] = f"source error: {text}"
                failed.setdefault(text, []).append(name)
                if self.metrics is not None:
                    self.metrics.source_errors.labels(name).inc()
            self._log_fetch_failures(failed)
            drift = self._policy_drift(served)
            forecasts, plan_problems = self._plan(served, window, previous, drift)
            for name, problem in plan_problems.items():
                # A source error says more than the "no data" that follows from it.
                problems.setdefault(name, problem)
            self._score(window)
        states = {}
        for name in self.workloads:
            old = previous.states.get(name)
            forecast = forecasts.get(name) or (old.forecast if old else None)
            last_data = window.last_data(name) if window is not None else None
            last_value = (
                window.value_at(name, last_data)
                if window is not None and last_data is not None
                else None
            )
            states[name] = WorkloadState(
                workload=name,
                # A drifted workload's last forecast followed a policy it no longer has.
                forecast=None if name in drift else forecast,
                last_data=last_data.to_pydatetime() if last_data is not None else None,
                last_value=last_value,
                problem=problems.get(name),
                drift=drift.get(name),
            )
        snapshot = Snapshot(
            states=states,
            max_staleness=self.config.serving.max_staleness,
            generated_at=datetime.now(UTC),
            model_name=served.name if served else None,
            model_version=served.version if served else None,
            sequence=previous.sequence + 1,
            shadow=self.shadow,
        )
        self.store.publish(snapshot)
        self._log_transitions(snapshot)
        elapsed = time.perf_counter() - started
        self.last_tick_seconds = elapsed
        self.ticks += 1
        if self.metrics is not None:
            self.metrics.refresh_duration.observe(elapsed)
            result = "failed" if not forecasts else ("partial" if problems else "ok")
            self.metrics.refreshes.labels(result).inc()
        heap.trim()  # what the refresh built and dropped, back to the operating system
        return snapshot

    def _count_refused(self, outcome: FetchOutcome) -> None:
        if self.metrics is not None:
            for name, count in outcome.refused.items():
                self.metrics.refused_values.labels(name).inc(count)

    def _log_fetch_failures(self, failed: Mapping[str, Sequence[str]]) -> None:
        """One line per distinct error per minute, naming how many workloads it failed:
        an outage fails every workload on every tick, and a line each would flood the log
        (``prewarm_source_errors_total`` counts each)."""
        for error, names in failed.items():
            fields = {"error": error, "workloads": len(names), "first_workloads": list(names[:10])}
            self._fetch_log.warn(logger, error, "history fetch failed", fields)

    def _policy_drift(self, served: LoadedModel[PlanningModel]) -> dict[str, str]:
        """Workload -> how its config differs from the policy registered with ``served``;
        each change of that answer is logged once. Computed once per served model: the config
        is fixed, so every tick of the same model gets the same answer."""
        if self._drift_of is not None and self._drift_of[0] is served:
            return self._drift_of[1]
        before = self._drift_of[1] if self._drift_of is not None else {}
        policies = served.model.policies
        drift = {}
        for name, workload in self.workloads.items():
            registered = policies.get(name)
            found = (
                None if registered is None else policy_drift(workload, registered, served.version)
            )
            if found is not None:
                drift[name] = found
            if before.get(name) != found:
                self._log_drift(name, found, served.version)
        self._drift_of = (served, drift)
        return drift

    def _log_drift(self, name: str, drift: str | None, version: str) -> None:
        if drift is None:
            logger.info(
                "workload policy agrees with the registered one",
                extra={"workload": name, "model_version": version},
            )
            return
        logger.warning(
            "policy drift: the workload's metric answers 503 / UNAVAILABLE until it is "
            "retrained or its config reverted",
            extra={"workload": name, "model_version": version, "reason": drift},
        )

    def _plan(
        self,
        served: LoadedModel[PlanningModel],
        window: RollingWindow,
        previous: Snapshot,
        drift: dict[str, str],
    ) -> tuple[dict[str, WorkloadForecast], dict[str, str]]:
        model = served.model
        known = set(model.workloads)
        problems: dict[str, str] = dict(drift)
        for name in self.workloads:
            if name in drift:
                continue
            if name not in known:
                problems[name] = (
                    f"model {served.name!r} version {served.version} has no forecast for this "
                    "workload (not in its training set)"
                )
            elif window.last_data(name) is None:
                problems.setdefault(name, "no data received yet")
        forecasts: dict[str, WorkloadForecast] = {}
        names = []
        for name in self._plannable(model, window):
            if name in drift:
                continue
            # No new data and the same model: the forecast would be the same, keep it.
            old = previous.states[name].forecast if name in previous.states else None
            last = window.last_data(name)
            if (
                old is not None
                and old.model_version == served.version
                and last is not None
                and old.origin == last
            ):
                forecasts[name] = old
            else:
                names.append(name)
        if not names:
            return forecasts, problems
        try:
            plans = [self._plan_batch(served, window.history(names))]
        except Exception as exc:
            # One bad series must not take every workload down: plan them one by one.
            logger.warning(
                "batched plan failed, planning workloads one by one",
                extra={"model_version": served.version, "error": f"{type(exc).__name__}: {exc}"},
            )
            plans = []
            for name in names:
                try:
                    plans.append(model.plan(window.frame([name])))
                except Exception as one:
                    problems[name] = f"prediction failed: {type(one).__name__}: {one}"
        generated = datetime.now(UTC)
        asked = set(names)
        for plan in plans:
            for row in _plan_rows(plan):
                name = str(row["series"])
                if name not in asked:
                    continue
                try:
                    policy = model.policies[name]
                    forecasts[name] = _forecast(
                        name, policy, row, served.version, generated, _served_by(model, name)
                    )
                except (ValueError, TypeError) as exc:
                    problems[name] = f"prediction failed: {exc}"
        for name in names:
            if name not in forecasts:
                problems.setdefault(name, "prediction failed: the model returned no row")
                logger.error(
                    "no usable forecast",
                    extra={
                        "workload": name,
                        "model_version": served.version,
                        "error": problems[name],
                    },
                )
                if self.metrics is not None:
                    self.metrics.prediction_errors.labels(name).inc()
            else:
                forecast = forecasts[name]
                due = forecast.origin + timedelta(seconds=forecast.lead_time_seconds)
                pending = self._pending[name]
                if not pending or pending[-1][0] < due:
                    pending.append((due, forecast.forecast_demand, forecast.quantile))
        return forecasts, problems

    def _plan_batch(self, served: LoadedModel[PlanningModel], history: History) -> pd.DataFrame:
        """One plan of every workload of ``history``: in the child process when configured."""
        if self.planner is not None:
            try:
                return self.planner.plan(served, history)
            except Exception as exc:
                # The child may have failed for its own reasons (a model that cannot be sent
                # across, a dead process): the model gets one more chance here before the
                # caller plans workload by workload.
                logger.warning(
                    "planning in the child process failed, planning here",
                    extra={
                        "model_version": served.version,
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )
        return plan_history(served.model, history)

    def _score(self, window: RollingWindow) -> None:
        """Online accuracy: forecasts whose target time has arrived against the actual demand."""
        if self.metrics is None:
            return
        names: list[str] = []
        predictions: list[float] = []
        actuals: list[float] = []
        quantiles: list[float] = []
        for name, pending in self._pending.items():
            last = window.last_data(name)
            while pending and last is not None and pending[0][0] <= last:
                due, predicted, quantile = pending.popleft()
                actual = window.value_at(name, due)
                if actual is None:
                    continue
                names.append(name)
                predictions.append(predicted)
                actuals.append(actual)
                quantiles.append(quantile)
        self.metrics.score_many(names, predictions, actuals, quantiles)

    def _log_transitions(self, snapshot: Snapshot) -> None:
        now = datetime.now(UTC)
        for name in snapshot.workloads:
            status = snapshot.status(name, now)
            if self._fresh.get(name) == status.fresh:
                continue
            self._fresh[name] = status.fresh
            if status.fresh:
                logger.info("workload fresh", extra={"workload": name})
            else:
                # The cause names what to mend: data (stale), a retrain (drift), a model...
                logger.warning(
                    "workload not served (%s): its metric answers 503 / UNAVAILABLE",
                    status.cause,
                    extra={"workload": name, "cause": status.cause, "reason": status.reason},
                )

    # -- loop ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every ``refresh_interval`` until ``stop`` is set, the registry polled
        beside (:meth:`ModelWatcher.start <serving.engine.models.ModelWatcher.start>`).

        Ticks run in a worker thread, so the event loop keeps answering requests from the
        previous snapshot while a refresh is under way; the two share the interpreter lock,
        so while the loop runs the lock changes hands every :data:`SWITCH_INTERVAL`, and
        after the first tick what the process holds is frozen out of the garbage
        collector's scans (:func:`freeze_long_lived`).
        """
        interval = self.config.serving.refresh_interval
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.watcher.start()
        try:
            await self._first_lookup(stop, interval)
            while not stop.is_set():
                started = time.monotonic()
                try:
                    await asyncio.to_thread(self.tick)
                except Exception:  # the loop must survive anything one tick does
                    logger.exception("refresh failed")
                    if self.metrics is not None:
                        self.metrics.refreshes.labels("failed").inc()
                freeze_long_lived()
                delay = max(0.0, interval - (time.monotonic() - started))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
        finally:
            self.watcher.stop()
            sys.setswitchinterval(switch)

    async def _first_lookup(self, stop: asyncio.Event, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the watcher's first look-up to end, so that the
        first refresh usually plans with the model instead of publishing "no model" for an
        interval; the registry's answer is never awaited longer than that."""
        deadline = time.monotonic() + timeout
        while not self.watcher.looked_up.is_set() and not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                # The look-up ends in another thread, which cannot wake the event loop; a
                # short wait on ``stop`` keeps shutdown prompt meanwhile.
                await asyncio.wait_for(stop.wait(), timeout=min(left, 0.05))

    def close(self) -> None:
        """Release the fetch threads, the sources and the planning process."""
        if self.window is not None:
            self.window.close()
        if self.planner is not None:
            self.planner.close()


def freeze_long_lived() -> bool:
    """Move every object the process holds now out of the garbage collector's scans, once
    per process (:func:`gc.freeze`); True if this call froze them.

    A full collection scans every container object of the process, and holds the
    interpreter lock while it does: at 10,000 workloads, some 350,000 objects and about
    150 ms, during which no request is answered, several times per refresh as each refresh
    allocates a snapshot. What exists after the first refresh (modules, the config, the
    window, the app) lives as long as the process, so scanning it finds nothing to free.
    Frozen objects are still freed when their last reference goes; only a reference cycle
    among them that became garbage would stay, which is why this runs once, after a
    collection. Measured at 10,000 workloads refreshed every 15 s, back to back
    (``benchmarks/serving_latency.py``): p99 39.3 and 38.3 ms without it, 17.4 and 19.9 ms
    with it.
    """
    if gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True


def _forecast(
    name: str,
    policy: WorkloadPolicy,
    row: Mapping[Hashable, Any],
    version: str,
    generated: datetime,
    served_by: str | None = None,
) -> WorkloadForecast:
    """The served answer: the plan's numbers, and everything else from the policy they were
    planned with (the registered one), so no field of an answer has another source."""
    spec = policy.spec
    demand = float(row["forecast_demand"])
    replicas = float(row["desired_replicas"])
    lead = float(row["lead_time_seconds"])
    check_plan_row(name, demand, replicas, lead)
    # The plan already clamps; clamping again keeps a faulty model inside the policy's bounds.
    desired = min(max(math.ceil(replicas - 1e-9), spec.min_replicas), spec.max_replicas)
    origin = pd.Timestamp(row["origin"])
    if origin.tzinfo is None:
        origin = origin.tz_localize("UTC")
    return WorkloadForecast(
        workload=name,
        desired_replicas=int(desired),
        forecast_demand=demand,
        quantile=float(row["quantile"]),
        lead_time_seconds=lead,
        origin=origin.to_pydatetime(),
        generated_at=generated,
        model_version=version,
        capacity_per_replica=spec.capacity_per_replica,
        target_utilization=policy.forecast_u,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        quantiles=_window_quantiles(row),
        peak_horizon_seconds=_optional_number(row.get("peak_horizon_seconds")),
        buffer_demand=_optional_number(row.get("buffer_demand")),
        served_by=served_by,
    )


def _plan_rows(plan: pd.DataFrame) -> Iterator[dict[Hashable, Any]]:
    """The plan's rows, as ``plan.to_dict("records")`` gives them, origins as datetimes.

    ``to_dict`` boxes the whole origin column into Timestamps in one call that holds the
    interpreter lock throughout (about 50 ms at 10,000 rows), while the event loop waits.
    Here each origin is made with its row. Origins that are not all times take ``to_dict``'s
    path, where each row then fails on its own.
    """
    try:
        micros = pd.to_datetime(plan["origin"], utc=True).to_numpy("datetime64[us]")
    except (KeyError, ValueError, TypeError):
        micros = None
    if micros is None or np.isnat(micros).any():
        yield from plan.to_dict("records")
        return
    others = [c for c in plan.columns if c != "origin"]
    columns = [plan[c].tolist() for c in others]
    for i, origin in enumerate(micros.astype(np.int64).tolist()):
        row: dict[Hashable, Any] = {c: column[i] for c, column in zip(others, columns, strict=True)}
        row["origin"] = _EPOCH + timedelta(microseconds=origin)
        yield row


def _served_by(model: PlanningModel, name: str) -> str | None:
    """The models forecasting ``name``, for a model that says (``PrewarmModel.served_by``;
    planning needs no such method, so other planning models say nothing)."""
    describe = getattr(model, "served_by", None)
    return None if describe is None else describe(name)


def _window_quantiles(row: Mapping[Hashable, Any]) -> dict[float, float]:
    """The plan's per-quantile lead-window maxima (``q0.9`` -> 0.9); non-finite ones left out,
    so an exported band never holds a NaN."""
    found = {}
    for column, value in row.items():
        quantile = _quantile_of(str(column))
        if quantile is not None and math.isfinite(float(value)):
            found[quantile] = float(value)
    return dict(sorted(found.items()))


def _quantile_of(column: str) -> float | None:
    if not column.startswith("q"):
        return None
    try:
        quantile = float(column[1:])
    except ValueError:
        return None
    return quantile if 0.0 < quantile < 1.0 else None


def _optional_number(value: Any) -> float | None:
    """A finite number of the plan's row, or None (absent, NaN)."""
    if value is None:
        return None
    seconds = float(value)
    return seconds if math.isfinite(seconds) else None


def workload_names(config: RefreshConfig) -> Sequence[str]:
    """Names of the served workloads, in config order."""
    return [w.name for w in config.workloads]
