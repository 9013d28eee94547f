"""How numbers fill KEDA's float and deprecated int64 fields, and the workload pick."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.exceptions import MetadataError, QuantityError
from serving.wire.scaler_messages import metric_spec, metric_value, workload_from_metadata
from serving.wire.stubs import load_externalscaler


@pytest.fixture(scope="module")
def pb2() -> Any:
    return load_externalscaler().pb2


def _keda_reads(float_field: float, int_field: int) -> float:
    # kedacore/keda pkg/scalers/external_scaler.go: the float wins only when > 0.
    return float_field if float_field > 0 else float(int_field)


@pytest.mark.parametrize(
    ("value", "as_int"),
    [(0, 0), (0.0, 0), (0.3, 1), (1, 1), (2.0, 2), (2.01, 3), (1e7, 10_000_000)],
    ids=["zero-int", "zero-float", "fraction", "one", "whole-float", "just-above", "large"],
)
def test_metric_value_fields(pb2: Any, value: float, as_int: int) -> None:
    message = metric_value(pb2, "prewarm_desired_replicas", value)
    assert message.metricName == "prewarm_desired_replicas"
    assert message.metricValueFloat == value
    assert message.metricValue == as_int
    assert _keda_reads(message.metricValueFloat, message.metricValue) == value


@given(st.floats(min_value=0, max_value=1e12))
def test_metric_value_int_never_under_reports(value: float) -> None:
    message = metric_value(load_externalscaler().pb2, "m", value)
    # The smallest integer not below the value (compared on integers, exact for floats).
    assert message.metricValue - 1 < value <= message.metricValue


@pytest.mark.parametrize(
    ("target", "as_int"),
    [(1, 1), (0.5, 0), (2.5, 2), (8.8, 8), (100, 100)],
    ids=["one", "below-one", "half", "fraction", "whole"],
)
def test_metric_spec_fields(pb2: Any, target: float, as_int: int) -> None:
    message = metric_spec(pb2, "prewarm_desired_replicas", target)
    assert message.targetSizeFloat == target
    assert message.targetSize == as_int


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-1.0, "finite and in"),
        (2.0**64, "finite and in"),
        (True, "real number"),
    ],
    ids=["nan", "inf", "negative", "beyond-int64", "bool"],
)
def test_metric_value_refuses(pb2: Any, value: float, match: str) -> None:
    with pytest.raises(QuantityError, match=match):
        metric_value(pb2, "m", value)


def test_metric_spec_refuses_zero_target(pb2: Any) -> None:
    with pytest.raises(QuantityError, match="`target` must be > 0"):
        metric_spec(pb2, "m", 0)


@pytest.mark.parametrize(
    ("metadata", "workload"),
    [
        ({"workload": "llm-a", "scalerAddress": "x:9000"}, "llm-a"),
        ({"workload": " llm-a\n"}, "llm-a"),
    ],
    ids=["plain", "yaml-whitespace"],
)
def test_workload_from_metadata(metadata: dict[str, str], workload: str) -> None:
    assert workload_from_metadata(metadata) == workload


@pytest.mark.parametrize(
    "metadata",
    [{}, {"scalerAddress": "x:9000"}, {"workload": "  "}],
    ids=["empty", "missing", "blank"],
)
def test_workload_from_metadata_refuses(metadata: dict[str, str]) -> None:
    with pytest.raises(MetadataError, match="must set `workload`") as info:
        workload_from_metadata(metadata)
    assert info.value.grpc_code == "INVALID_ARGUMENT"
    for key in metadata:
        assert key in str(info.value)
