"""Routes for KEDA's ``metrics-api`` scaler: one workload's forecast, and all of them.

Point the trigger at ``/v1/workloads/<name>/forecast`` with ``valueLocation:
desiredReplicas`` and ``targetValue: "1"`` (the HPA then follows the replica count), or with
``valueLocation: forecastDemand`` and ``targetValue`` = capacity per replica x utilization.
A stale forecast answers 503, which KEDA counts towards its ``fallback``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response

from serving.api import schemas
from serving.api.runtime import Authorized, CurrentSnapshot, Runtime, RuntimeDep
from serving.engine.snapshot import WorkloadForecast, WorkloadStatus
from serving.wire import k8s, replies

__all__ = ["forecast_document", "forecast_reply", "router"]

router = APIRouter(prefix="/v1", tags=["keda"])


def forecast_document(forecast: WorkloadForecast, status: WorkloadStatus) -> dict[str, Any]:
    """The JSON fields of one workload's forecast (camelCase, as KEDA users write paths)."""
    return replies.forecast_document(forecast, status.data_age_seconds)


def _json(document: dict[str, Any]) -> Response:
    return Response(k8s.encode_json(document), media_type=k8s.CONTENT_TYPE)


def forecast_reply(runtime: Runtime, name: str, authorization: str | None) -> bytes:
    """The forecast document of workload ``name`` as JSON bytes.

    The app calls it straight from its ASGI entry point (see :mod:`serving.api.app`); the route
    below is the same function behind FastAPI.

    Raises
    ------
    AuthenticationError, UnknownWorkloadError, ForecastUnavailableError
        401 (checked first), 404 and 503 (stale or missing forecast).
    """
    runtime.verifier.check(authorization)
    body = runtime.store.encoded.keda(name, datetime.now(UTC))
    if body is not None:
        return body
    # Authenticated above: an unknown name's 404 may list the configured ones.
    forecast = runtime.forecast(name, api="keda")
    status = runtime.store.current.status(name)
    return k8s.encode_json(forecast_document(forecast, status))


@router.get(
    "/workloads/{name}/forecast", responses=schemas.responses(schemas.Forecast, 401, 404, 503)
)
def workload_forecast(
    name: str, runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """One workload's forecast; 401 without the token (when one is set), 404 if unknown,
    503 while stale."""
    return Response(forecast_reply(runtime, name, authorization), media_type=k8s.CONTENT_TYPE)


@router.get("/workloads", responses=schemas.responses(schemas.WorkloadList, 401))
def list_workloads(snapshot: CurrentSnapshot, _: Authorized) -> Response:
    """Every workload: its forecast fields (null when none, and in shadow mode, where no value
    is answered) and status (fresh or stale, and why a value would be refused)."""
    now = datetime.now(UTC)
    items = []
    for name in snapshot.workloads:
        status = snapshot.status(name, now)
        refused = snapshot.refusal(name, now)
        forecast = None if snapshot.shadow else snapshot.states[name].forecast
        item: dict[str, Any] = {
            "workload": name,
            "status": "fresh" if status.fresh else "stale",
            "reason": refused[1] if refused else None,
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
