"""The external scaler proto: names and field numbers (interfaces.md 3.2), wire bytes, and a
real gRPC round trip through the generated stubs."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor

from serving.exceptions import UnknownWorkloadError
from serving.wire.stubs import STUBS_DIR, generate_stubs, load_externalscaler


@pytest.fixture(scope="module")
def pb2() -> Any:
    return load_externalscaler().pb2


@pytest.fixture(scope="module")
def pb2_grpc() -> Any:
    return load_externalscaler().pb2_grpc


F = FieldDescriptor
# (message, field, number, type, repeated?) as interfaces.md 3.2 lists them.
FIELDS = [
    ("ScaledObjectRef", "name", 1, F.TYPE_STRING, False),
    ("ScaledObjectRef", "namespace", 2, F.TYPE_STRING, False),
    ("ScaledObjectRef", "scalerMetadata", 3, F.TYPE_MESSAGE, True),  # map<string,string>
    ("IsActiveResponse", "result", 1, F.TYPE_BOOL, False),
    ("GetMetricSpecResponse", "metricSpecs", 1, F.TYPE_MESSAGE, True),
    ("MetricSpec", "metricName", 1, F.TYPE_STRING, False),
    ("MetricSpec", "targetSize", 2, F.TYPE_INT64, False),
    ("MetricSpec", "targetSizeFloat", 3, F.TYPE_DOUBLE, False),
    ("GetMetricsRequest", "scaledObjectRef", 1, F.TYPE_MESSAGE, False),
    ("GetMetricsRequest", "metricName", 2, F.TYPE_STRING, False),
    ("GetMetricsResponse", "metricValues", 1, F.TYPE_MESSAGE, True),
    ("MetricValue", "metricName", 1, F.TYPE_STRING, False),
    ("MetricValue", "metricValue", 2, F.TYPE_INT64, False),
    ("MetricValue", "metricValueFloat", 3, F.TYPE_DOUBLE, False),
]


@pytest.mark.parametrize(
    ("message", "name", "number", "kind", "repeated"),
    FIELDS,
    ids=[f"{m}.{n}" for m, n, *_ in FIELDS],
)
def test_field_numbers_and_types(
    pb2: Any, message: str, name: str, number: int, kind: int, repeated: bool
) -> None:
    descriptor = getattr(pb2, message).DESCRIPTOR
    field = descriptor.fields_by_name[name]
    assert field.number == number
    assert field.type == kind
    assert field.is_repeated is repeated


@pytest.mark.parametrize(
    "message",
    sorted({m for m, *_ in FIELDS}),
)
def test_messages_have_no_extra_fields(pb2: Any, message: str) -> None:
    declared = {name for m, name, *_ in FIELDS if m == message}
    assert set(getattr(pb2, message).DESCRIPTOR.fields_by_name) == declared


def test_scaler_metadata_is_a_string_map(pb2: Any) -> None:
    entry = pb2.ScaledObjectRef.DESCRIPTOR.fields_by_name["scalerMetadata"].message_type
    assert entry.GetOptions().map_entry
    assert entry.fields_by_name["key"].type == F.TYPE_STRING
    assert entry.fields_by_name["value"].type == F.TYPE_STRING


def test_nested_message_types(pb2: Any) -> None:
    fields = {
        ("GetMetricSpecResponse", "metricSpecs"): "externalscaler.MetricSpec",
        ("GetMetricsRequest", "scaledObjectRef"): "externalscaler.ScaledObjectRef",
        ("GetMetricsResponse", "metricValues"): "externalscaler.MetricValue",
    }
    for (message, name), full_name in fields.items():
        field = getattr(pb2, message).DESCRIPTOR.fields_by_name[name]
        assert field.message_type.full_name == full_name


# (method, request, response, server streaming?)
METHODS = [
    ("IsActive", "ScaledObjectRef", "IsActiveResponse", False),
    ("StreamIsActive", "ScaledObjectRef", "IsActiveResponse", True),
    ("GetMetricSpec", "ScaledObjectRef", "GetMetricSpecResponse", False),
    ("GetMetrics", "GetMetricsRequest", "GetMetricsResponse", False),
    ("StreamMetricSpec", "ScaledObjectRef", "GetMetricSpecResponse", True),
]


def test_service_methods(pb2: Any) -> None:
    service = pb2.DESCRIPTOR.services_by_name["ExternalScaler"]
    assert service.full_name == "externalscaler.ExternalScaler"
    assert [m.name for m in service.methods] == [m for m, *_ in METHODS]
    for name, request, response, streaming in METHODS:
        method = service.methods_by_name[name]
        assert method.input_type.full_name == f"externalscaler.{request}"
        assert method.output_type.full_name == f"externalscaler.{response}"
        assert method.server_streaming is streaming
        assert method.client_streaming is False


def _double(value: float) -> bytes:
    return struct.pack("<d", value)


# Protobuf wire bytes written by hand from the field numbers (tag = number << 3 | wire type),
# i.e. what KEDA's Go client sends and expects.
WIRE = [
    (
        "ScaledObjectRef",
        {"name": "so", "namespace": "ns", "scalerMetadata": {"workload": "a"}},
        b"\x0a\x02so\x12\x02ns\x1a\x0d\x0a\x08workload\x12\x01a",
    ),
    ("IsActiveResponse", {"result": True}, b"\x08\x01"),
    (
        "MetricSpec",
        {"metricName": "m", "targetSize": 1, "targetSizeFloat": 1.0},
        b"\x0a\x01m\x10\x01\x19" + _double(1.0),
    ),
    (
        "MetricValue",
        {"metricName": "m", "metricValue": 3, "metricValueFloat": 2.5},
        b"\x0a\x01m\x10\x03\x19" + _double(2.5),
    ),
    (
        "GetMetricsRequest",
        {"scaledObjectRef": {"name": "so"}, "metricName": "m"},
        b"\x0a\x04\x0a\x02so\x12\x01m",
    ),
    (
        "GetMetricsResponse",
        {"metricValues": [{"metricName": "m", "metricValue": 1}]},
        b"\x0a\x05\x0a\x01m\x10\x01",
    ),
    (
        "GetMetricSpecResponse",
        {"metricSpecs": [{"metricName": "m", "targetSize": 1}]},
        b"\x0a\x05\x0a\x01m\x10\x01",
    ),
]


def _build(pb2: Any, message: str, fields: dict[str, Any]) -> Any:
    from google.protobuf import json_format

    return json_format.ParseDict(fields, getattr(pb2, message)())


@pytest.mark.parametrize(("message", "fields", "wire"), WIRE, ids=[w[0] for w in WIRE])
def test_wire_bytes(pb2: Any, message: str, fields: dict[str, Any], wire: bytes) -> None:
    built = _build(pb2, message, fields)
    assert built.SerializeToString(deterministic=True) == wire
    assert getattr(pb2, message).FromString(wire) == built


# --- a real channel ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def channel(pb2: Any, pb2_grpc: Any) -> Iterator[grpc.Channel]:
    # Method names are the RPC names of the proto, hence CamelCase.
    class Servicer(pb2_grpc.ExternalScalerServicer):
        def IsActive(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
            return pb2.IsActiveResponse(result=request.scalerMetadata["active"] == "true")

        def StreamIsActive(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
            for result in (False, True, False):
                yield pb2.IsActiveResponse(result=result)

        def GetMetricSpec(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
            name = request.scalerMetadata["workload"]
            return pb2.GetMetricSpecResponse(
                metricSpecs=[pb2.MetricSpec(metricName=name, targetSize=1, targetSizeFloat=1.0)]
            )

        def GetMetrics(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
            workload = request.scaledObjectRef.scalerMetadata["workload"]
            if workload == "missing":
                exc = UnknownWorkloadError(f"no workload {workload!r}", workload=workload)
                context.abort(grpc.StatusCode[exc.grpc_code], str(exc))
            return pb2.GetMetricsResponse(
                metricValues=[
                    pb2.MetricValue(
                        metricName=request.metricName, metricValue=3, metricValueFloat=2.5
                    )
                ]
            )

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb2_grpc.add_ExternalScalerServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
            grpc.channel_ready_future(chan).result(timeout=5)
            yield chan
    finally:
        server.stop(grace=None)


def _ref(pb2: Any, **metadata: str) -> Any:
    return pb2.ScaledObjectRef(name="so", namespace="team-a", scalerMetadata=metadata)


@pytest.mark.integration
def test_round_trip_over_a_real_channel(pb2: Any, pb2_grpc: Any, channel: grpc.Channel) -> None:
    stub = pb2_grpc.ExternalScalerStub(channel)
    ref = _ref(pb2, workload="llm-a", active="true")

    assert stub.IsActive(ref, timeout=5).result is True
    assert stub.IsActive(_ref(pb2, workload="llm-a", active="no"), timeout=5).result is False
    assert [r.result for r in stub.StreamIsActive(ref, timeout=5)] == [False, True, False]

    (spec,) = stub.GetMetricSpec(ref, timeout=5).metricSpecs
    assert (spec.metricName, spec.targetSize, spec.targetSizeFloat) == ("llm-a", 1, 1.0)

    request = pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas")
    (value,) = stub.GetMetrics(request, timeout=5).metricValues
    assert (value.metricName, value.metricValue, value.metricValueFloat) == (
        "prewarm_desired_replicas",
        3,
        2.5,
    )


@pytest.mark.integration
def test_method_paths_are_the_ones_keda_calls(pb2: Any, channel: grpc.Channel) -> None:
    call = channel.unary_unary(
        "/externalscaler.ExternalScaler/IsActive",
        request_serializer=pb2.ScaledObjectRef.SerializeToString,
        response_deserializer=pb2.IsActiveResponse.FromString,
    )
    assert call(_ref(pb2, active="true"), timeout=5).result is True


@pytest.mark.integration
def test_errors_reach_the_client_with_code_and_message(
    pb2: Any, pb2_grpc: Any, channel: grpc.Channel
) -> None:
    stub = pb2_grpc.ExternalScalerStub(channel)
    request = pb2.GetMetricsRequest(scaledObjectRef=_ref(pb2, workload="missing"), metricName="m")
    with pytest.raises(grpc.RpcError) as info:
        stub.GetMetrics(request, timeout=5)
    assert info.value.code() is grpc.StatusCode.NOT_FOUND
    assert info.value.details() == "no workload 'missing'"


@pytest.mark.integration
def test_unimplemented_stream_metric_spec_keeps_keda_pull_only(
    pb2: Any, pb2_grpc: Any, channel: grpc.Channel
) -> None:
    stub = pb2_grpc.ExternalScalerStub(channel)
    with pytest.raises(grpc.RpcError) as info:
        list(stub.StreamMetricSpec(_ref(pb2), timeout=5))
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED


# --- generation ----------------------------------------------------------------------------


def test_generation_is_skipped_when_current_and_redone_when_forced() -> None:
    generate_stubs()
    module = STUBS_DIR / "externalscaler_pb2.py"
    before = module.stat().st_mtime_ns
    generate_stubs()
    assert module.stat().st_mtime_ns == before
    generate_stubs(force=True)
    assert module.stat().st_mtime_ns != before
    assert not [p for p in STUBS_DIR.iterdir() if p.name.startswith(".tmp-")]


def test_importing_serving_generates_and_imports_nothing() -> None:
    code = (
        "import sys; import serving, serving.wire.k8s, serving.wire.selector, "
        "serving.wire.quantity, serving.wire.stubs, serving.exceptions; "
        "print(sorted(m for m in sys.modules if m.startswith(('grpc', 'serving.wire._proto'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
