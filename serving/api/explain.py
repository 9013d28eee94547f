"""``GET /v1/workloads/NAME/explain``: why one workload's current answer is what it is.

One request says where every number of the answer comes from: the demand now and its age,
each quantile's forecast over the lead window and the horizon that set the planned maximum,
the registered policy's capacity per replica and forecast utilization, the replicas that
needs before and after the ``[min, max]`` clamp, the model version, and, when the value is
refused, why (stale data, policy drift, no model, shadow mode). It reads the same snapshot the
metric endpoints answer from, so the explanation is of the answer they give at that moment::

    desiredReplicas = clamp(ceil(forecastDemand / (capacityPerReplica x utilization)), min, max)

It is a human's view, never a metric: the bearer token applies as on the KEDA endpoints.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from fastapi import APIRouter, Response

from forecaster.capacity import desired_replicas
from serving.api import schemas
from serving.api.runtime import Authorized, CurrentSnapshot
from serving.engine.snapshot import Snapshot, WorkloadForecast
from serving.wire import k8s

__all__ = ["explanation", "router"]

router = APIRouter(prefix="/v1", tags=["explain"])


def explanation(snapshot: Snapshot, name: str, now: datetime) -> dict[str, Any]:
    """The explanation document of workload ``name`` in ``snapshot`` at ``now``.

    Parameters
    ----------
    snapshot : Snapshot
        The snapshot the metric endpoints answer from.
    name : str
        Workload name.
    now : datetime
        The moment ages and freshness are judged at (tz-aware).

    Returns
    -------
    dict
        ``workload, mode, served, refused {cause, reason} | null, modelVersion, servedBy (the
        registered models forecasting the workload when the model combines or selects them per
        workload, else null), demand {now,
        at, ageSeconds}``, and, once the workload has a forecast, ``forecast {quantile,
        forecastDemand, quantiles, peakHorizonSeconds, bufferDemand, leadTimeSeconds, origin,
        dataAgeSeconds, generatedAt}``, ``capacity {capacityPerReplica, utilization,
        demandTarget}`` and ``replicas {needed, minReplicas, maxReplicas, clamp,
        desiredReplicas}`` (null before).

    Raises
    ------
    UnknownWorkloadError
        If no workload of that name is configured (HTTP 404).
    """
    state = snapshot.state(name)
    status = snapshot.status(name, now)
    refused = snapshot.refusal(name, now)
    forecast = state.forecast
    last = state.last_data
    return {
        "workload": name,
        "mode": "shadow" if snapshot.shadow else "serving",
        "served": refused is None,
        "refused": None if refused is None else {"cause": refused[0], "reason": refused[1]},
        "modelVersion": forecast.model_version if forecast else snapshot.model_version,
        "servedBy": forecast.served_by if forecast else None,
        "demand": {
            "now": state.last_value,
            "at": k8s.format_time(last) if last else None,
            "ageSeconds": None
            if last is None
            else round(max(0.0, (now - last).total_seconds()), 3),
        },
        "forecast": None if forecast is None else _forecast(forecast, status.data_age_seconds),
        "capacity": None if forecast is None else _capacity(forecast),
        "replicas": None if forecast is None else _replicas(forecast),
    }


def _forecast(forecast: WorkloadForecast, data_age_seconds: float | None) -> dict[str, Any]:
    return {
        "quantile": forecast.quantile,
        "forecastDemand": forecast.forecast_demand,
        "quantiles": {f"{q:g}": value for q, value in forecast.quantiles.items()},
        "peakHorizonSeconds": forecast.peak_horizon_seconds,
        "bufferDemand": forecast.buffer_demand,
        "leadTimeSeconds": forecast.lead_time_seconds,
        "origin": k8s.format_time(forecast.origin),
        "dataAgeSeconds": None if data_age_seconds is None else round(data_age_seconds, 3),
        "generatedAt": k8s.format_time(forecast.generated_at),
    }


def _capacity(forecast: WorkloadForecast) -> dict[str, Any]:
    return {
        "capacityPerReplica": forecast.capacity_per_replica,
        "utilization": forecast.target_utilization,
        "demandTarget": forecast.demand_target,
    }


def _replicas(forecast: WorkloadForecast) -> dict[str, Any]:
    # The planning formula without its bounds, so the clamp shows as what it changed.
    needed = int(
        desired_replicas(
            forecast.forecast_demand,
            capacity_per_replica=forecast.capacity_per_replica,
            target_utilization=forecast.target_utilization,
            min_replicas=0,
            max_replicas=np.iinfo(np.int64).max,
        )
    )
    clamp = (
        "min"
        if needed < forecast.min_replicas
        else "max"
        if needed > forecast.max_replicas
        else None
    )
    return {
        "needed": needed,
        "minReplicas": forecast.min_replicas,
        "maxReplicas": forecast.max_replicas,
        "clamp": clamp,
        "desiredReplicas": forecast.desired_replicas,
    }


@router.get("/workloads/{name}/explain", responses=schemas.responses(schemas.Explanation, 401, 404))
def explain(name: str, snapshot: CurrentSnapshot, _: Authorized) -> Response:
    """Why workload ``name``'s current answer is what it is; 401 without the token (when one
    is set), 404 if unknown. Answered 200 even when the value is refused: ``refused`` says
    why."""
    document = explanation(snapshot, name, datetime.now(UTC))
    return Response(k8s.encode_json(document), media_type=k8s.CONTENT_TYPE)
