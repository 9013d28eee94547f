"""The JSON documents of prewarm's own endpoints, as models for the OpenAPI document.

The routes write their bodies with the builders of :mod:`serving.wire` (cached bytes, no
per-request validation); these models only describe those bodies, so ``/openapi.json`` says
what a client gets, and each route's ``responses`` (:data:`ERRORS`) says which
``metav1.Status`` answers it can give. ``tests/serving/test_fuzz_openapi.py`` checks every
answer of the live server against them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "ERRORS",
    "LABEL_SELECTOR",
    "Explanation",
    "ExternalMetricValueList",
    "Forecast",
    "Status",
    "WorkloadList",
    "responses",
]


class _Document(BaseModel):
    """Fields are written in camelCase on the wire, as Kubernetes and KEDA users read them."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class StatusDetails(_Document):
    """``metav1.StatusDetails``: what the error is about."""

    name: str | None = None
    group: str | None = None
    kind: str | None = None
    retry_after_seconds: int | None = None


class Status(_Document):
    """``metav1.Status``: every error body, with the HTTP code and its Kubernetes reason."""

    kind: Literal["Status"]
    api_version: Literal["v1"]
    metadata: dict[str, Any]
    status: Literal["Failure"]
    message: str = Field(description="What is wrong, echoing at most ~100 characters of input.")
    reason: str = Field(description="The metav1.StatusReason of the code, e.g. NotFound.")
    details: StatusDetails | None = None
    code: int


class Forecast(_Document):
    """One workload's forecast, as KEDA's ``metrics-api`` trigger reads it."""

    workload: str
    desired_replicas: int = Field(ge=0)
    forecast_demand: float = Field(ge=0)
    quantile: float
    lead_time_seconds: float
    generated_at: str
    origin: str
    data_age_seconds: float = Field(ge=0)
    model_version: str
    demand_target: float
    min_replicas: int
    max_replicas: int


class WorkloadListItem(_Document):
    """One workload of ``/v1/workloads``: the forecast fields are null without a forecast."""

    workload: str
    status: Literal["fresh", "stale"]
    reason: str | None = Field(description="Why a value would be refused; null when served.")
    desired_replicas: int | None
    forecast_demand: float | None
    quantile: float | None
    lead_time_seconds: float | None
    generated_at: str | None
    model_version: str | None
    data_age_seconds: float | None
    origin: str | None = None
    demand_target: float | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None


class WorkloadList(_Document):
    """Every configured workload."""

    generated_at: str | None
    model_version: str | None
    workloads: list[WorkloadListItem]


class Refusal(_Document):
    """Why the value is refused."""

    cause: Literal["stale", "drift", "no_model", "no_forecast", "shadow"]
    reason: str


class Demand(_Document):
    """The latest demand received."""

    now: float | None
    at: str | None
    age_seconds: float | None


class ExplainedForecast(_Document):
    """The forecast behind the answer."""

    quantile: float
    forecast_demand: float
    quantiles: dict[str, float]
    peak_horizon_seconds: float | None
    buffer_demand: float | None
    lead_time_seconds: float
    origin: str
    data_age_seconds: float | None
    generated_at: str


class Capacity(_Document):
    """The registered policy's capacity."""

    capacity_per_replica: float
    utilization: float
    demand_target: float


class Replicas(_Document):
    """The replicas the forecast needs, before and after the bounds."""

    needed: int
    min_replicas: int
    max_replicas: int
    clamp: Literal["min", "max"] | None
    desired_replicas: int


class Explanation(_Document):
    """Where every number of one workload's answer comes from."""

    workload: str
    mode: Literal["serving", "shadow"]
    served: bool
    refused: Refusal | None
    model_version: str | None
    served_by: str | None = Field(
        default=None,
        description="Registered models forecasting the workload (a combination or selection).",
    )
    demand: Demand
    forecast: ExplainedForecast | None
    capacity: Capacity | None
    replicas: Replicas | None


class ExternalMetricValue(_Document):
    """One item of an ``ExternalMetricValueList``."""

    metric_name: str
    metric_labels: dict[str, str]
    timestamp: str
    window: int | None = None
    value: str = Field(description="A resource.Quantity, e.g. 1500m.")


class ExternalMetricValueList(_Document):
    """What the HPA reads."""

    kind: Literal["ExternalMetricValueList"]
    api_version: Literal["external.metrics.k8s.io/v1beta1"]
    metadata: dict[str, Any]
    items: list[ExternalMetricValue]


LABEL_SELECTOR: dict[str, Any] = {
    "name": "labelSelector",
    "in": "query",
    "required": False,
    "description": "Must pin one workload: workload=NAME (at most 4,096 characters).",
    "schema": {"type": "string"},
}
"""The External Metrics API's selector parameter, as the OpenAPI document lists it."""

ERRORS: dict[int, str] = {
    400: "Malformed request: selector, query parameter",
    401: "The bearer token is missing or wrong (when one is configured)",
    404: "Unknown workload or metric",
    503: "No value to scale on (stale data, drift, no model, shadow mode): hold",
}
"""Every error status a route of prewarm answers, each with a ``metav1.Status`` body."""


def responses(ok: type[BaseModel], *codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route answering ``ok`` with 200 and ``Status`` for ``codes``.

    A ``default`` entry (any other error, also a ``Status``) keeps FastAPI from documenting
    the 422 it never answers: validation errors are 400 here.
    """
    documented: dict[int | str, dict[str, Any]] = {200: {"model": ok}}
    for code in codes:
        documented[code] = {"model": Status, "description": ERRORS[code]}
    documented["default"] = {"model": Status, "description": "Any other error"}
    return documented
