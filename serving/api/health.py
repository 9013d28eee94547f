"""Liveness, readiness and the service's own Prometheus metrics.

Readiness means the process can answer the API, not that every forecast is fresh: the
``v1beta1.external.metrics.k8s.io`` APIService is cluster-wide, and a pod taken out of the
Service for a data or model outage would make the aggregator mark the whole group
unavailable, which disturbs discovery for every client of the cluster. While data is stale
or no model is loaded, each metric answers the hold error (503), which the HPA and KEDA
hold on. Freshness is reported on ``/metrics`` (``prewarm_workload_fresh``,
``prewarm_data_age_seconds``), in each refused answer's ``Status`` and per workload, with
its reason, on ``/v1/workloads``; ``/readyz`` gives only categories, because its body is
unauthenticated and reasons may carry source internals (addresses, queries).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from serving.api.runtime import CurrentSnapshot, RuntimeDep
from serving.engine.models import ModelWatcher
from serving.wire import k8s

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Response:
    """The process is alive and its event loop answers."""
    return Response(k8s.encode_json({"status": "ok"}), media_type=k8s.CONTENT_TYPE)


def _model_problem(watcher: ModelWatcher) -> str | None:
    """The category of the registry's last problem: ``no_model`` while nothing is loaded
    (a first look-up that hangs included: it has no error yet), ``registry_error`` when a
    loaded model is served but the last lookup or load failed."""
    if watcher.current is None:
        return "no_model"
    return None if watcher.last_error is None else "registry_error"


@router.get("/readyz")
def readyz(snapshot: CurrentSnapshot, runtime: RuntimeDep) -> Response:
    """Ready (200) whenever the app is up: a missing model or stale data is answered with
    the hold error on each metric, never by leaving the Service (see the module docs).

    The body says what would be served: the fresh workloads and, for each refused one, the
    category of its refusal (``stale``, ``drift``, ``no_model``, ``no_forecast``); the
    reasons themselves go to the log and to ``/v1/workloads``. ``mode`` is ``shadow`` when
    no value is served (``prewarm serve --shadow``), else ``serving``.
    """
    now = datetime.now(UTC)
    fresh, stale = [], {}
    for name in snapshot.workloads:
        status = snapshot.status(name, now)
        if status.fresh:
            fresh.append(name)
        else:
            stale[name] = status.cause
    watcher = runtime.watcher
    body = {
        "ready": True,
        "mode": "shadow" if snapshot.shadow else "serving",
        "model": {
            "name": snapshot.model_name or runtime.components.config.model_name,
            "version": snapshot.model_version,
            "problem": _model_problem(watcher),
            "rejectedVersions": watcher.rejected_versions(),
            "registryCallRunningSeconds": round(watcher.busy_for(), 1),
        },
        "lastRefresh": k8s.format_time(snapshot.generated_at) if snapshot.generated_at else None,
        "fresh": fresh,
        "stale": stale,
    }
    return Response(k8s.encode_json(body), media_type=k8s.CONTENT_TYPE)


@router.get("/metrics")
def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus text exposition of the service's own registry."""
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
