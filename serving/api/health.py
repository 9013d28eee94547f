"""Liveness, readiness and the service's own Prometheus metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from serving.api.runtime import CurrentSnapshot, RuntimeDep
from serving.wire import k8s

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Response:
    """The process is alive and its event loop answers."""
    return Response(k8s.encode_json({"status": "ok"}), media_type=k8s.CONTENT_TYPE)


@router.get("/readyz")
def readyz(snapshot: CurrentSnapshot, runtime: RuntimeDep) -> Response:
    """Ready when a model is loaded and at least one workload is fresh.

    The body lists the fresh workloads and, for each stale one, why; it is returned with
    503 when not ready so that Kubernetes keeps the pod out of the Service. ``mode`` is
    ``shadow`` when no value is served (``prewarm serve --shadow``), else ``serving``.
    """
    now = datetime.now(UTC)
    fresh, stale = [], {}
    for name in snapshot.workloads:
        status = snapshot.status(name, now)
        if status.fresh:
            fresh.append(name)
        else:
            stale[name] = status.reason
    model_loaded = snapshot.model_version is not None
    ready = model_loaded and bool(fresh)
    body = {
        "ready": ready,
        "mode": "shadow" if snapshot.shadow else "serving",
        "model": {
            "name": snapshot.model_name or runtime.components.config.model_name,
            "version": snapshot.model_version,
            "problem": runtime.watcher.last_error,
        },
        "lastRefresh": k8s.format_time(snapshot.generated_at) if snapshot.generated_at else None,
        "fresh": fresh,
        "stale": stale,
    }
    return Response(
        k8s.encode_json(body), status_code=200 if ready else 503, media_type=k8s.CONTENT_TYPE
    )


@router.get("/metrics")
def metrics(runtime: RuntimeDep) -> Response:
    """Prometheus text exposition of the service's own registry."""
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
