"""Routes for KEDA's ``metrics-api`` scaler: one workload's forecast, and all of them.

Point the trigger at ``/v1/workloads/<name>/forecast`` with ``valueLocation:
desiredReplicas`` and ``targetValue: "1"`` (the HPA then follows the replica count), or with
``valueLocation: forecastDemand`` and ``targetValue`` = capacity per replica x utilization.
A stale forecast answers 503, which KEDA counts towards its ``fallback``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Response

from serving import k8s
from serving.runtime import Authorized, CurrentSnapshot, RuntimeDep
from serving.snapshot import WorkloadForecast, WorkloadStatus

__all__ = ["forecast_document", "router"]

router = APIRouter(prefix="/v1", tags=["keda"])


def forecast_document(forecast: WorkloadForecast, status: WorkloadStatus) -> dict[str, Any]:
    """The JSON fields of one workload's forecast (camelCase, as KEDA users write paths)."""
    return {
        "workload": forecast.workload,
        "desiredReplicas": forecast.desired_replicas,
        "forecastDemand": forecast.forecast_demand,
        "quantile": forecast.quantile,
        "leadTimeSeconds": forecast.lead_time_seconds,
        "generatedAt": k8s.format_time(forecast.generated_at),
        "origin": k8s.format_time(forecast.origin),
        "dataAgeSeconds": round(status.data_age_seconds or 0.0, 3),
        "modelVersion": forecast.model_version,
        "demandTarget": forecast.demand_target,
        "minReplicas": forecast.min_replicas,
        "maxReplicas": forecast.max_replicas,
    }


def _json(document: dict[str, Any]) -> Response:
    return Response(k8s.encode_json(document), media_type=k8s.CONTENT_TYPE)


@router.get("/workloads/{name}/forecast")
def workload_forecast(name: str, runtime: RuntimeDep, _: Authorized) -> Response:
    """One workload's forecast; 404 if unknown, 503 while stale."""
    forecast = runtime.forecast(name, api="keda")
    status = runtime.store.current.status(name)
    return _json(forecast_document(forecast, status))


@router.get("/workloads")
def list_workloads(snapshot: CurrentSnapshot, _: Authorized) -> Response:
    """Every workload: its forecast fields (null when none) and status (fresh or stale, why)."""
    now = datetime.now(UTC)
    items = []
    for name in snapshot.workloads:
        status = snapshot.status(name, now)
        forecast = snapshot.states[name].forecast
        item: dict[str, Any] = {
            "workload": name,
            "status": "fresh" if status.fresh else "stale",
            "reason": status.reason or None,
        }
        if forecast is not None:
            item.update(forecast_document(forecast, status))
        else:
            item.update(
                dict.fromkeys(
                    (
                        "desiredReplicas",
                        "forecastDemand",
                        "quantile",
                        "leadTimeSeconds",
                        "generatedAt",
                        "modelVersion",
                    ),
                )
            )
            item["dataAgeSeconds"] = (
                None if status.data_age_seconds is None else round(status.data_age_seconds, 3)
            )
        items.append(item)
    return _json(
        {
            "generatedAt": (
                k8s.format_time(snapshot.generated_at) if snapshot.generated_at else None
            ),
            "modelVersion": snapshot.model_version,
            "workloads": items,
        }
    )
