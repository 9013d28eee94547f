"""External Metrics API documents and metav1.Status bodies, compared to interfaces.md 1.2-1.5."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from serving.exceptions import (
    AuthenticationError,
    ForecastUnavailableError,
    PermissionDeniedError,
    QuantityError,
    SelectorError,
    UnknownWorkloadError,
)
from serving.wire import k8s
from serving.wire.k8s import ExternalMetricValue
from serving.wire.selector import parse_selector

NOON = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)

# The documents of interfaces.md 1.4, with prewarm's two metrics in place of the example one.
DOC_RESOURCE_LIST = """
{
  "kind": "APIResourceList",
  "apiVersion": "v1",
  "groupVersion": "external.metrics.k8s.io/v1beta1",
  "resources": [
    {"name": "prewarm_desired_replicas", "singularName": "", "namespaced": true,
     "kind": "ExternalMetricValueList", "verbs": ["get"]},
    {"name": "prewarm_forecast_demand", "singularName": "", "namespaced": true,
     "kind": "ExternalMetricValueList", "verbs": ["get"]}
  ]
}
"""
DOC_GROUP = """
{
  "kind": "APIGroup", "apiVersion": "v1",
  "name": "external.metrics.k8s.io",
  "versions": [{"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}],
  "preferredVersion": {"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}
}
"""
DOC_GROUP_LIST = """
{
  "kind": "APIGroupList", "apiVersion": "v1",
  "groups": [{
    "name": "external.metrics.k8s.io",
    "versions": [{"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}],
    "preferredVersion": {"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}
  }]
}
"""


@pytest.mark.parametrize(
    ("build", "documented"),
    [
        (k8s.api_resource_list, DOC_RESOURCE_LIST),
        (k8s.api_group, DOC_GROUP),
        (k8s.api_group_list, DOC_GROUP_LIST),
    ],
    ids=["apis-group-version", "apis-group", "apis"],
)
def test_discovery_documents_match_the_interface(build: object, documented: str) -> None:
    document = build()  # type: ignore[operator]
    assert document == json.loads(documented)
    assert json.loads(k8s.encode_json(document)) == json.loads(documented)


def test_discovery_paths() -> None:
    assert k8s.API_PATH == "/apis"
    assert k8s.GROUP_PATH == "/apis/external.metrics.k8s.io"
    assert k8s.VERSION_PATH == "/apis/external.metrics.k8s.io/v1beta1"
    assert (
        k8s.METRIC_PATH.format(namespace="default", metric="prewarm_desired_replicas")
        == "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
    )


def test_discovery_documents_are_fresh_objects() -> None:
    first = k8s.api_resource_list()
    first["resources"].clear()
    assert len(k8s.api_resource_list()["resources"]) == 2
    assert k8s.api_resource_list([])["resources"] == []


def test_value_list_matches_the_documented_example() -> None:
    documented = json.loads(
        """
        {
          "kind": "ExternalMetricValueList",
          "apiVersion": "external.metrics.k8s.io/v1beta1",
          "metadata": {},
          "items": [
            {
              "metricName": "predicted_rps",
              "metricLabels": {"app": "llm"},
              "timestamp": "2026-05-01T12:00:00Z",
              "window": 60,
              "value": "1500m"
            }
          ]
        }
        """
    )
    item = ExternalMetricValue("predicted_rps", 1.5, NOON, {"app": "llm"}, window_seconds=60)
    document = k8s.external_metric_value_list([item])
    assert document == documented
    # Go's field order, which kubectl --raw shows too.
    assert list(document) == ["kind", "apiVersion", "metadata", "items"]
    assert list(document["items"][0]) == [
        "metricName",
        "metricLabels",
        "timestamp",
        "window",
        "value",
    ]


def test_value_list_wire_bytes_without_window() -> None:
    item = ExternalMetricValue(k8s.METRIC_DESIRED_REPLICAS, 2000, NOON, {"workload": "llm-a"})
    assert k8s.encode_json(k8s.external_metric_value_list([item])) == (
        b'{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1",'
        b'"metadata":{},"items":[{"metricName":"prewarm_desired_replicas",'
        b'"metricLabels":{"workload":"llm-a"},"timestamp":"2026-05-01T12:00:00Z",'
        b'"value":"2k"}]}'
    )


def test_value_list_keeps_every_item_in_order() -> None:
    items = [ExternalMetricValue("m", v, NOON) for v in (0, 0.0004, 12)]
    document = k8s.external_metric_value_list(items)
    assert [i["value"] for i in document["items"]] == ["0", "400u", "12"]
    assert all(i["metricLabels"] == {} for i in document["items"])


def test_empty_value_list_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        k8s.external_metric_value_list([])


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (NOON, "2026-05-01T12:00:00Z"),
        (NOON + timedelta(microseconds=999_999), "2026-05-01T12:00:00Z"),
        (datetime(2026, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))), "2026-05-01T12:00:00Z"),
        (
            datetime(2026, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1))),
            "2027-01-01T00:30:00Z",
        ),
    ],
    ids=["utc", "sub-second-truncated", "plus-two", "minus-one-next-year"],
)
def test_format_time_is_rfc3339_utc_seconds(moment: datetime, expected: str) -> None:
    assert k8s.format_time(moment) == expected


@pytest.mark.parametrize(
    ("item", "error", "match"),
    [
        (ExternalMetricValue("m", 1, datetime(2026, 5, 1, 12)), ValueError, "timezone-aware"),
        (ExternalMetricValue("m", math.nan, NOON), QuantityError, "finite"),
        (ExternalMetricValue("m", -1.0, NOON), QuantityError, ">= 0"),
        (ExternalMetricValue("m", 1, NOON, window_seconds=-5), ValueError, "window_seconds"),
        (ExternalMetricValue("m", 1, NOON, window_seconds=True), ValueError, "window_seconds"),
    ],
    ids=["naive-time", "nan", "negative", "negative-window", "bool-window"],
)
def test_bad_items_are_refused(item: ExternalMetricValue, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        k8s.external_metric_value_list([item])


REASONS = [
    (400, "BadRequest"),
    (401, "Unauthorized"),
    (403, "Forbidden"),
    (404, "NotFound"),
    (500, "InternalError"),
    (503, "ServiceUnavailable"),
    (504, "Timeout"),
]


@pytest.mark.parametrize(("code", "reason"), REASONS, ids=[r for _, r in REASONS])
def test_status_body_has_the_documented_shape(code: int, reason: str) -> None:
    assert k8s.status_body(code, "why") == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "why",
        "reason": reason,
        "code": code,
    }


def test_status_body_matches_the_documented_not_found() -> None:
    documented = json.loads(
        """
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": "the server could not find the metric predicted_rps for namespace default",
         "reason": "NotFound",
         "details": {"name": "predicted_rps", "group": "external.metrics.k8s.io"},
         "code": 404}
        """
    )
    body = k8s.status_body(
        404,
        "the server could not find the metric predicted_rps for namespace default",
        name="predicted_rps",
        group=k8s.GROUP,
    )
    assert body == documented
    assert list(body) == [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ]


def test_status_body_retry_after() -> None:
    body = k8s.status_body(503, "stale", retry_after_seconds=15)
    assert body["details"] == {"retryAfterSeconds": 15}


def test_status_body_refuses_codes_without_a_reason() -> None:
    with pytest.raises(ValueError, match="`code` must be one of"):
        k8s.status_body(418, "teapot")


def test_check_metric() -> None:
    for metric in ("prewarm_desired_replicas", "prewarm_forecast_demand"):
        k8s.check_metric(metric, "default")
    with pytest.raises(LookupError, match="prewarm_desired_replicas, prewarm_forecast_demand"):
        k8s.check_metric("s0-prewarm", "default")


def _selector_error() -> SelectorError:
    try:
        parse_selector("workload in (a")
    except SelectorError as exc:
        return exc
    raise AssertionError("the selector should not parse")


def _unknown_metric() -> LookupError:
    try:
        k8s.check_metric("nope", "team-a")
    except LookupError as exc:
        return exc
    raise AssertionError("the metric should be unknown")


ERRORS = [
    ("bad-selector", _selector_error(), 400, "BadRequest", None),
    ("no-token", AuthenticationError("missing bearer token"), 401, "Unauthorized", None),
    ("forbidden", PermissionDeniedError("user x may not list"), 403, "Forbidden", None),
    (
        "unknown-metric",
        _unknown_metric(),
        404,
        "NotFound",
        {"name": "nope", "group": "external.metrics.k8s.io"},
    ),
    (
        "unknown-workload",
        UnknownWorkloadError("no workload 'llm-z'", workload="llm-z"),
        404,
        "NotFound",
        {"name": "llm-z"},
    ),
    (
        "stale",
        ForecastUnavailableError("data for llm-a is 900 s old"),
        503,
        "ServiceUnavailable",
        None,
    ),
]


@pytest.mark.parametrize(
    ("exc", "code", "reason", "details"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_status_from_error(
    exc: Exception, code: int, reason: str, details: dict[str, str] | None
) -> None:
    got_code, body = k8s.status_from_error(exc)
    assert got_code == code == body["code"]
    assert body["reason"] == reason
    assert body["message"] == str(exc)
    assert body.get("details") == details


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("token file /secret/path unreadable"),
        QuantityError("`value` must be finite, got nan"),
    ],
    ids=["unexpected", "internal-serving-error"],
)
def test_internal_errors_do_not_leak(exc: Exception) -> None:
    code, body = k8s.status_from_error(exc)
    assert code == 500
    assert body["reason"] == "InternalError"
    assert str(exc) not in body["message"]


def test_encode_json_refuses_nan() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        k8s.encode_json({"value": math.nan})
