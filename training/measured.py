"""Cold start and capacity per replica measured in Prometheus, for ``auto`` workloads.

A workload whose ``capacity`` says ``cold_start: auto`` or ``capacity_per_replica: auto``
has them measured before training, over the source's lookback (see ``docs/measured.md``):

* the cold start from kube-state-metrics' pod series selected by ``measured.pods``:
  ``kube_pod_created`` and ``kube_pod_status_ready_time`` (unix seconds), joined on
  ``namespace``, ``pod`` and ``uid``; each pod created in the lookback and ready is one observation;
* the capacity from the workload's demand, its ready replicas (``ready_replicas``, default
  the ready pods of ``measured.pods``) and, when given, ``measured.queue`` (e.g.
  ``sum(vllm:num_requests_waiting{model_name="chat"})``);
* whether the demand is capped: a series that plateaus at ready replicas x capacity counts
  completions, not arrivals, and is warned about (logged, and tagged on the run).

The pure estimators are :mod:`forecaster.cold_start`; this module queries and logs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster.cold_start import (
    CapacityEstimate,
    CapCheck,
    ColdStartEstimate,
    check_capped,
    estimate_capacity,
    estimate_cold_start,
)
from forecaster.exceptions import shown
from training.config import AUTO, TrainConfig, WorkloadConfig
from training.exceptions import HistoryFetchError, NoSeriesError
from training.sources.base import HistorySource

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from mlflow import MlflowClient

    from training.sources.prometheus import PrometheusSource

logger = logging.getLogger(__name__)

CREATED = "kube_pod_created"
READY_TIME = "kube_pod_status_ready_time"
READY_PODS = 'sum(kube_pod_status_ready{{condition="true", {pods}}})'


@dataclass(frozen=True)
class Measurement:
    """What was measured for one workload, and the configured values it stands beside."""

    cold_start: ColdStartEstimate | None
    capacity: CapacityEstimate | None
    configured_capacity: float | None
    capped: CapCheck
    """The demand compared with ready replicas x the capacity planned with."""


def resolve_measured(
    config: TrainConfig, source: HistorySource
) -> tuple[TrainConfig, dict[str, Measurement]]:
    """``config`` with every ``auto`` replaced by its measurement, and the measurements.

    Raises
    ------
    HistoryFetchError
        A query failed or returned nothing (the workload and the query are named).
    DataValidationError
        The series cannot give an estimate (e.g. the queue never grew).
    """
    wanted = [w for w in config.workloads if w.measures]
    if not wanted:
        return config, {}
    prometheus = _prometheus(source)
    start, end, step = source.window(config.source.step, config.source.lookback)
    window = (int(start.timestamp()), int(end.timestamp()), step)
    measured = {w.name: measure(w, prometheus, window) for w in wanted}
    workloads = [_resolved(w, measured.get(w.name)) for w in config.workloads]
    for name, found in measured.items():
        for line in _lines(found):
            logger.info(line, extra={"workload": name})
        if found.capped.capped:
            logger.warning(found.capped.describe(), extra={"workload": name})
    return config.model_copy(update={"workloads": workloads}), measured


def measure(
    workload: WorkloadConfig, source: PrometheusSource, window: tuple[int, int, int]
) -> Measurement:
    """The cold start and capacity of ``workload`` over ``window`` (start, end, step)."""
    settings = workload.measured
    capacity = workload.capacity
    cold = None
    if settings.pods is not None:
        created, ready = pod_times(workload.name, settings.pods, source, window)
        cold = estimate_cold_start(
            workload.name,
            created,
            ready,
            quantile=settings.cold_start_quantile,
            min_starts=settings.min_starts,
            fallback=float(settings.cold_start_fallback),
        )
    configured = (
        None if capacity.capacity_per_replica == AUTO else float(capacity.capacity_per_replica)
    )
    per_replica, capped = _capacity(workload, source, window, configured)
    return Measurement(cold, per_replica, configured, capped)


def _capacity(
    workload: WorkloadConfig,
    source: PrometheusSource,
    window: tuple[int, int, int],
    configured: float | None,
) -> tuple[CapacityEstimate | None, CapCheck]:
    """The capacity estimate (for ``auto`` or with a queue) and the capped-demand check.

    The demand is compared with the measured capacity when there is one: a plateau sits at
    what the replicas really serve, which a typed value may miss. Else with ``configured``.
    """
    demand, ready, queue = _load_series(workload, source, window)
    if configured is not None and queue is None:
        return None, check_capped(workload.name, demand, ready, configured)
    estimate = estimate_capacity(
        workload.name, demand, ready, queue, quantile=workload.measured.load_quantile
    )
    return estimate, check_capped(workload.name, demand, ready, estimate.per_replica)


def pod_times(
    workload: str, pods: str, source: PrometheusSource, window: tuple[int, int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Creation and ready times of the pods created in ``window`` that became ready."""
    start, end, _ = window
    created = _per_pod(workload, CREATED, pods, source, window)
    ready = _per_pod(workload, READY_TIME, pods, source, window)
    if not created:
        raise NoSeriesError(
            f"no {CREATED} series match the pods of workload {workload!r} in the lookback "
            f"(selector {shown(pods)}): check the selector and that kube-state-metrics is "
            "scraped"
        )
    pairs = [(c, ready[pod]) for pod, c in created.items() if start <= c <= end and pod in ready]
    never = sum(1 for pod, c in created.items() if start <= c <= end and pod not in ready)
    if never:
        logger.info(
            "workload %r: %d pods created in the lookback never became ready",
            workload,
            never,
            extra={"workload": workload},
        )
    values = np.array(pairs, dtype=float).reshape(-1, 2)
    return values[:, 0], values[:, 1]


def _per_pod(
    workload: str, metric: str, pods: str, source: PrometheusSource, window: tuple[int, int, int]
) -> dict[tuple[str, str, str], float]:
    """``{(namespace, pod, uid): value}`` of ``metric``'s largest value over the window.

    The uid tells apart the pods a StatefulSet re-creates under one name; two
    kube-state-metrics replicas report the same pod under one key.
    """
    start, end, step = window
    query = f"max_over_time({metric}{{{pods}}}[{end - start + step}s])"
    # One grid point at the window's end: the source's range query, with its retries,
    # timeouts and redaction, answers the per-pod vector there.
    result: list[dict[str, Any]] = source._request(workload, query, end, end, step)
    out: dict[tuple[str, str, str], float] = {}
    for item in result:
        labels = item.get("metric", {})
        try:
            value = float(item["values"][-1][1])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise HistoryFetchError(
                f"Prometheus answered a malformed series for workload {workload!r} ({exc!r}). "
                f"Query: {shown(query)}"
            ) from exc
        if math.isfinite(value):
            key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("uid", ""))
            out[key] = value
    return out


def _load_series(
    workload: WorkloadConfig, source: PrometheusSource, window: tuple[int, int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Demand, ready replicas and (when ``measured.queue`` is set) the queue, on one grid."""
    settings = workload.measured
    start, end, step = window
    ready = workload.ready_replicas or READY_PODS.format(pods=settings.pods)
    extra = {"ready": ready} | ({} if settings.queue is None else {"queue": settings.queue})
    history = source.fetch(
        {workload.name: workload.demand or workload.name},
        pd.Timestamp(start, unit="s", tz="UTC"),
        pd.Timestamp(end, unit="s", tz="UTC"),
        step,
        covariates={workload.name: extra},
    )
    frame = history.frame
    return (
        frame["value"].to_numpy(dtype=float),
        frame["ready"].to_numpy(dtype=float),
        None if settings.queue is None else frame["queue"].to_numpy(dtype=float),
    )


def _resolved(workload: WorkloadConfig, found: Measurement | None) -> WorkloadConfig:
    """``workload`` with its ``auto`` values replaced by ``found``'s."""
    capacity = workload.capacity
    update: dict[str, Any] = {}
    if capacity.cold_start == AUTO and found is not None and found.cold_start is not None:
        # Whole seconds, rounded up: a replica asked for a little early costs less than one
        # asked for a little late.
        update["cold_start"] = math.ceil(found.cold_start.seconds)
    if capacity.capacity_per_replica == AUTO and found is not None and found.capacity:
        update["capacity_per_replica"] = found.capacity.per_replica
    if not update:
        return workload
    return workload.model_copy(update={"capacity": capacity.model_copy(update=update)})


def _lines(found: Measurement) -> list[str]:
    lines = []
    if found.cold_start is not None:
        lines.append(found.cold_start.describe())
    if found.capacity is not None:
        lines.append(found.capacity.describe(found.configured_capacity))
    return lines


def _prometheus(source: HistorySource) -> PrometheusSource:
    from training.sources.prometheus import PrometheusSource

    if not isinstance(source, PrometheusSource):
        raise HistoryFetchError(
            f"`auto` cold starts and capacities are measured in Prometheus; the source is "
            f"{type(source).__name__}"
        )
    return source


def log_measured(client: MlflowClient, run_id: str, measured: Mapping[str, Measurement]) -> None:
    """Params, metrics and one figure of the measurements on the run ``run_id``."""
    if not measured:
        return
    for name, found in measured.items():
        prefix = f"measured.{name}"
        cold = found.cold_start
        if cold is not None:
            client.log_param(run_id, f"{prefix}.cold_start_seconds", f"{cold.seconds:g}")
            client.log_param(run_id, f"{prefix}.cold_start_source", _source(cold))
            for key, value in cold.summary.items():
                if math.isfinite(value):
                    client.log_metric(run_id, f"{prefix}.cold_start_{key}", value)
        if found.capacity is not None:
            client.log_param(run_id, f"{prefix}.capacity_method", found.capacity.method)
            client.log_metric(run_id, f"{prefix}.capacity_estimate", found.capacity.per_replica)
            if found.configured_capacity is not None:
                client.log_metric(
                    run_id, f"{prefix}.capacity_configured", found.configured_capacity
                )
        client.log_metric(run_id, f"{prefix}.capped_share", found.capped.share)
    lines = [line for found in measured.values() for line in _lines(found)]
    client.set_tag(run_id, "prewarm.measured", "; ".join(lines))
    capped = [m.capped.describe() for m in measured.values() if m.capped.capped]
    if capped:
        client.set_tag(run_id, "prewarm.capped_demand", "; ".join(capped))
    starts = {n: m.cold_start for n, m in measured.items() if m.cold_start is not None}
    if starts:
        client.log_figure(run_id, cold_start_figure(starts), "measured/cold_start.png")


def _source(cold: ColdStartEstimate) -> str:
    return f"q{cold.quantile:g} of {len(cold.durations)}" if cold.measured else "fallback"


def cold_start_figure(starts: Mapping[str, ColdStartEstimate]) -> Figure:
    """Each workload's observed cold starts (histogram) and the value planned with."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 2.6 * len(starts)), layout="constrained")
    axes = np.atleast_1d(figure.subplots(len(starts), 1))
    for axis, (name, cold) in zip(axes, starts.items(), strict=True):
        if len(cold.durations):
            axis.hist(cold.durations, bins=min(30, max(5, len(cold.durations))), color="0.6")
        axis.axvline(cold.seconds, color="C1", label=f"planned: {cold.seconds:.0f} s")
        axis.set_title(f"{name}: {len(cold.durations)} pods, created -> ready ({_source(cold)})")
        axis.set_xlabel("seconds")
        axis.legend(loc="upper right", fontsize="small")
    return figure
