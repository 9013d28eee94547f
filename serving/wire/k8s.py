"""Wire documents of the Kubernetes External Metrics API (``external.metrics.k8s.io/v1beta1``).

Pure builders, no I/O: the discovery documents the aggregator and ``kubectl`` read, the
``ExternalMetricValueList`` the HPA reads, and the ``metav1.Status`` error bodies. Field names,
nesting and ``omitempty`` behaviour follow the Go types in ``k8s.io/metrics`` and
``k8s.io/apimachinery``; the consumers are Go clients that reject anything else.

Routes the app serves (discovery is never behind authentication, or the aggregator marks the
APIService unavailable):

===================================================================  ======================
``GET /apis``                                                         :func:`api_group_list`
``GET /apis/external.metrics.k8s.io``                                 :func:`api_group`
``GET /apis/external.metrics.k8s.io/v1beta1``                         :func:`api_resource_list`
``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}``  :func:`external_metric_value_list`
===================================================================  ======================

Every body goes out as ``Content-Type: application/json``, encoded with :func:`encode_json`.
"""  # noqa: E501  (the route table cannot wrap)

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from forecaster.exceptions import SHOWN_CHARS, shown
from serving.exceptions import ServingError, UnknownMetricError, UnknownWorkloadError
from serving.wire.quantity import format_quantity

__all__ = [
    "API_PATH",
    "CONTENT_TYPE",
    "EXTERNAL_METRICS",
    "GROUP",
    "GROUP_PATH",
    "GROUP_VERSION",
    "METRIC_DESIRED_REPLICAS",
    "METRIC_FORECAST_DEMAND",
    "METRIC_PATH",
    "STATUS_REASONS",
    "VERSION",
    "VERSION_PATH",
    "ExternalMetricValue",
    "JSONDict",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "check_metric",
    "encode_json",
    "external_metric_value_list",
    "format_time",
    "status_body",
    "status_from_error",
]

JSONDict = dict[str, Any]
"""A JSON object as the standard library encodes it."""

GROUP = "external.metrics.k8s.io"
VERSION = "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
CONTENT_TYPE = "application/json"

API_PATH = "/apis"
GROUP_PATH = f"{API_PATH}/{GROUP}"
VERSION_PATH = f"{GROUP_PATH}/{VERSION}"
METRIC_PATH = f"{VERSION_PATH}/namespaces/{{namespace}}/{{metric}}"

METRIC_DESIRED_REPLICAS = "prewarm_desired_replicas"
"""Replicas needed one lead time from now; use with HPA target ``AverageValue: 1``."""
METRIC_FORECAST_DEMAND = "prewarm_forecast_demand"
"""Forecast demand over the lead window; HPA target ``AverageValue`` = capacity x utilization."""
EXTERNAL_METRICS: tuple[str, ...] = (METRIC_DESIRED_REPLICAS, METRIC_FORECAST_DEMAND)
"""Every external metric prewarm serves, in discovery order."""

STATUS_REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
"""HTTP code -> ``metav1.StatusReason``, as ``k8s.io/apimachinery/pkg/api/errors`` pairs them."""


def _group_version() -> JSONDict:
    return {"groupVersion": GROUP_VERSION, "version": VERSION}


def api_group() -> JSONDict:
    """Return the ``APIGroup`` document served at ``GET /apis/external.metrics.k8s.io``.

    Returns
    -------
    dict
        ``{"kind": "APIGroup", "apiVersion": "v1", "name": ..., "versions": [...],
        "preferredVersion": {...}}``; a fresh object on every call.
    """
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [_group_version()],
        "preferredVersion": _group_version(),
    }


def api_group_list() -> JSONDict:
    """Return the ``APIGroupList`` document served at ``GET /apis``.

    Returns
    -------
    dict
        One group, ``external.metrics.k8s.io``; the group entry carries no ``kind`` or
        ``apiVersion``, as in Go's ``APIGroupList.Groups``.
    """
    group = api_group()
    del group["kind"], group["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}


def api_resource_list(metrics: Sequence[str] = EXTERNAL_METRICS) -> JSONDict:
    """Return the ``APIResourceList`` served at ``GET /apis/external.metrics.k8s.io/v1beta1``.

    This is the document the kube-aggregator's availability check fetches.

    Parameters
    ----------
    metrics : sequence of str, default :data:`EXTERNAL_METRICS`
        Metric names to list, each as a namespaced resource with verb ``get``.

    Returns
    -------
    dict
        Each resource has the five fields Go always emits (``name``, ``singularName``,
        ``namespaced``, ``kind``, ``verbs``) and none of the ``omitempty`` ones.
    """
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [
            {
                "name": name,
                "singularName": "",
                "namespaced": True,
                "kind": "ExternalMetricValueList",
                "verbs": ["get"],
            }
            for name in metrics
        ],
    }


def check_metric(metric: str, namespace: str) -> None:
    """Raise unless ``metric`` is one of :data:`EXTERNAL_METRICS`.

    Parameters
    ----------
    metric : str
        The ``{metric}`` path segment, as requested.
    namespace : str
        The ``{namespace}`` path segment, for the message.

    Raises
    ------
    UnknownMetricError
        Naming the metric, the namespace and the metrics served (HTTP 404).
    """
    if metric not in EXTERNAL_METRICS:
        raise UnknownMetricError(
            f"the server could not find the metric {shown(metric)} for namespace "
            f"{shown(namespace)}; "
            f"served metrics: {', '.join(EXTERNAL_METRICS)}",
            metric=metric,
        )


def format_time(moment: datetime) -> str:
    """Write a ``metav1.Time``: RFC 3339 in UTC with whole seconds, e.g. ``2026-05-01T12:00:00Z``.

    Go truncates (does not round) sub-second digits, and so does this.

    Parameters
    ----------
    moment : datetime
        A timezone-aware datetime.

    Raises
    ------
    ValueError
        If ``moment`` is naive: its zone would be a guess.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"`moment` must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class ExternalMetricValue:
    """One item of an ``ExternalMetricValueList``.

    Parameters
    ----------
    metric_name : str
        Echo of the requested metric name (``metricName``).
    value : float
        The value; written as a Quantity string, so it must be finite and ``>= 0``.
    timestamp : datetime
        When the value was computed; timezone-aware.
    labels : mapping of str to str, default {}
        ``metricLabels``; the HPA ignores them, people reading ``kubectl get --raw`` do not.
    window_seconds : int or None, default None
        ``window``: the span the value covers, in seconds; None for an instantaneous value
        (the field is then omitted, as Go's ``omitempty`` does).
    """

    metric_name: str
    value: float
    timestamp: datetime
    labels: Mapping[str, str] = field(default_factory=dict)
    window_seconds: int | None = None

    def to_json(self) -> JSONDict:
        """Return the item as the Go type marshals it, keys in Go's field order.

        Raises
        ------
        QuantityError
            If ``value`` is NaN, infinite or negative.
        ValueError
            If ``timestamp`` is naive or ``window_seconds`` is negative.
        """
        item: JSONDict = {
            "metricName": self.metric_name,
            "metricLabels": dict(self.labels),
            "timestamp": format_time(self.timestamp),
        }
        if self.window_seconds is not None:
            window = self.window_seconds
            if isinstance(window, bool) or not isinstance(window, int) or window < 0:
                raise ValueError(f"`window_seconds` must be an int >= 0, got {window!r}")
            item["window"] = window
        item["value"] = format_quantity(self.value)
        return item


def external_metric_value_list(items: Sequence[ExternalMetricValue]) -> JSONDict:
    """Return the ``ExternalMetricValueList`` the HPA reads.

    Parameters
    ----------
    items : sequence of ExternalMetricValue
        At least one item. The HPA sums ``MilliValue()`` over all items.

    Returns
    -------
    dict
        ``{"kind": "ExternalMetricValueList", "apiVersion":
        "external.metrics.k8s.io/v1beta1", "metadata": {}, "items": [...]}``.

    Raises
    ------
    ValueError
        If ``items`` is empty: the HPA treats an empty list as a failed fetch, so the caller
        must answer a ``metav1.Status`` (404 or 503) that says why instead.

    Examples
    --------
    >>> from datetime import datetime, UTC
    >>> doc = external_metric_value_list(
    ...     [ExternalMetricValue("prewarm_desired_replicas", 1.5, datetime(2026, 5, 1, 12, tzinfo=UTC))]
    ... )
    >>> doc["items"][0]["value"], doc["items"][0]["timestamp"]
    ('1500m', '2026-05-01T12:00:00Z')
    """  # noqa: E501
    if not items:
        raise ValueError(
            "`items` must not be empty: the HPA reads an empty list as an error; "
            "answer a metav1.Status instead"
        )
    return {
        "kind": "ExternalMetricValueList",
        "apiVersion": GROUP_VERSION,
        "metadata": {},
        "items": [item.to_json() for item in items],
    }


def status_body(
    code: int,
    message: str,
    *,
    name: str | None = None,
    group: str | None = None,
    kind: str | None = None,
    retry_after_seconds: int | None = None,
) -> JSONDict:
    """Return a failure ``metav1.Status``; send it with HTTP status ``code``.

    Parameters
    ----------
    code : int
        HTTP status; its reason comes from :data:`STATUS_REASONS`.
    message : str
        Human-readable explanation.
    name, group, kind : str or None
        ``details`` fields; ``details`` is omitted when none of them and no
        ``retry_after_seconds`` is given (Go's ``omitempty``).
    retry_after_seconds : int or None
        ``details.retryAfterSeconds``; pair it with a ``Retry-After`` header.

    Returns
    -------
    dict
        ``{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": ..., "reason": ..., ["details": {...},] "code": code}``.

    Raises
    ------
    ValueError
        If ``code`` has no ``metav1.StatusReason`` here.

    Examples
    --------
    >>> status_body(503, "forecast for llm-a is stale")["reason"]
    'ServiceUnavailable'
    """
    if code not in STATUS_REASONS:
        raise ValueError(f"`code` must be one of {sorted(STATUS_REASONS)}, got {code!r}")
    details: JSONDict = {}
    for key, value in (("name", name), ("group", group), ("kind", kind)):
        if value:  # omitempty drops "" as well as nil
            details[key] = value
    if retry_after_seconds:
        details["retryAfterSeconds"] = retry_after_seconds
    body: JSONDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": STATUS_REASONS[code],
    }
    if details:
        body["details"] = details
    body["code"] = code
    return body


def status_from_error(exc: BaseException) -> tuple[int, JSONDict]:
    """Map any exception to ``(http_status, metav1.Status body)``; the app's one error handler.

    A :class:`~serving.exceptions.ServingError` answers with its ``http_status`` and message.
    A 500, and any other exception, answers a generic message: internals stay in the log,
    which the caller writes.

    Parameters
    ----------
    exc : BaseException
        The error raised while handling the request.

    Returns
    -------
    tuple of (int, dict)
        The HTTP status and the body for :func:`encode_json`.
    """
    code = exc.http_status if isinstance(exc, ServingError) else 500
    if code not in STATUS_REASONS or code == 500:
        return 500, status_body(500, "Internal error occurred: see the prewarm server log")
    if isinstance(exc, UnknownMetricError):
        return code, status_body(code, str(exc), name=exc.metric[:SHOWN_CHARS], group=GROUP)
    if isinstance(exc, UnknownWorkloadError):
        return code, status_body(code, str(exc), name=exc.workload[:SHOWN_CHARS])
    return code, status_body(code, str(exc))


def encode_json(document: JSONDict) -> bytes:
    """Encode a document compactly as UTF-8 JSON, refusing NaN and infinities.

    Python's default would write ``NaN``, which is not JSON and which Go's decoder rejects.

    Raises
    ------
    ValueError
        If the document holds a NaN or an infinity.
    """
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )
