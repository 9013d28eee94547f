"""The gRPC external scaler's defences: its integer fields, its authentication, its error texts.

Over a real gRPC channel to the app's server (uvicorn and the gRPC server on free ports), with
real certificates for mutual TLS.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from serving.api.app import create_app, uvicorn_config
from serving.api.grpc_server import MAX_MESSAGE_BYTES, stream_limit
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from serving.wire.scaler_messages import metric_spec, metric_value
from serving.wire.stubs import load_externalscaler
from tests.serving.pki import Pki, make_pki
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    fit_planner,
    free_port,
    history,
    refresh_config,
    running,
    specs,
    wait_until,
)

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0, "embed": 7.0}
NAMESPACES = {"chat": "default", "embed": "inference"}
TOKEN = "grpc-s3cret"
BEARER = (("authorization", f"Bearer {TOKEN}"),)


def _int_reader_replicas(value: Any, spec: Any) -> float:
    """Replicas a reader of only the int64 fields plans (HPA ``AverageValue``); inf when it
    gets a target of 0, which the API server refuses (``averageValue`` must be positive)."""
    if spec.targetSize == 0:
        return math.inf
    return math.ceil(value.metricValue / spec.targetSize)


def _float_reader_replicas(value: Any, spec: Any) -> int:
    # kedacore/keda pkg/scalers/external_scaler.go reads the float whenever it is > 0.
    return math.ceil(value.metricValueFloat / spec.targetSizeFloat)


def test_forecast_demand_ints_never_plan_fewer_replicas_than_the_floats() -> None:
    """The reported case: demand 0.498 against a target of 0.024 is 21 replicas."""
    pb2 = load_externalscaler().pb2
    value = metric_value(pb2, "prewarm_forecast_demand", 0.498)
    spec = metric_spec(pb2, "prewarm_forecast_demand", 0.024)
    assert value.metricValue >= value.metricValueFloat
    assert _float_reader_replicas(value, spec) == 21
    assert _int_reader_replicas(value, spec) >= 21


@given(
    st.floats(min_value=0, max_value=1e9),
    st.floats(min_value=1e-6, max_value=1e6),
)
def test_int_fields_never_under_provision(demand: float, target: float) -> None:
    pb2 = load_externalscaler().pb2
    value = metric_value(pb2, "m", demand)
    spec = metric_spec(pb2, "m", target)
    assert value.metricValue >= demand
    assert _int_reader_replicas(value, spec) >= _float_reader_replicas(value, spec)


def _app(settings: ServingSettings) -> Any:
    now = pd.Timestamp.now(tz="UTC")
    frame = history(LEVELS, now, 200)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    workloads = [replace(w, namespace=NAMESPACES[w.name]) for w in config.workloads]
    config = replace(config, workloads=workloads)
    return create_app(settings, ServingComponents(config, lambda: source, registry))


@contextmanager
def _serving(settings: ServingSettings) -> Iterator[int]:
    """Run the app; yield its gRPC port once a model serves."""
    app = _app(settings)
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.model_version is not None)
        assert runtime.grpc_port
        yield runtime.grpc_port


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A stub on a plain channel to a server that requires the token."""
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    settings = ServingSettings(port=free_port(), grpc_port=0, token_file=token_file)
    stubs = load_externalscaler()
    with _serving(settings) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield stubs.pb2, stubs.pb2_grpc.ExternalScalerStub(channel)


def _ref(pb2: Any, workload: str = "chat") -> Any:
    return pb2.ScaledObjectRef(
        name="so", namespace="default", scalerMetadata={"workload": workload}
    )


@pytest.mark.parametrize(
    "metadata",
    [
        (),
        (("authorization", "Bearer wrong-token"),),
        (("authorization", TOKEN),),
        (("authorization", f"Basic {TOKEN}"),),
        (("authorization", TOKEN * 500),),  # under gRPC's 8 KiB metadata limit
    ],
    ids=["missing", "wrong", "not-bearer", "basic", "5500-chars"],
)
def test_every_rpc_refuses_a_call_without_the_token(plain: Any, metadata: Any) -> None:
    pb2, stub = plain
    ref = _ref(pb2)
    calls = {
        "IsActive": lambda: stub.IsActive(ref, timeout=5, metadata=metadata),
        "GetMetricSpec": lambda: stub.GetMetricSpec(ref, timeout=5, metadata=metadata),
        "GetMetrics": lambda: stub.GetMetrics(
            pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas"),
            timeout=5,
            metadata=metadata,
        ),
        "StreamIsActive": lambda: next(stub.StreamIsActive(ref, timeout=5, metadata=metadata)),
    }
    for name, call in calls.items():
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, name
        details = caught.value.details() or ""
        # No part of the credential comes back, whatever its scheme: the token sent without
        # one was once echoed as the "scheme" it used.
        sent = " ".join(value for _, value in metadata).split()
        assert not [word for word in sent if word != "Bearer" and word in details], name
        assert len(details) < 400, name


def test_the_token_is_accepted(plain: Any) -> None:
    pb2, stub = plain
    (spec,) = stub.GetMetricSpec(_ref(pb2), timeout=5, metadata=BEARER).metricSpecs
    assert spec.metricName == "prewarm_desired_replicas"
    assert stub.IsActive(_ref(pb2), timeout=5, metadata=BEARER).result is True


# -- mutual TLS -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pki, int]]:
    folder = tmp_path_factory.mktemp("pki")
    pki = make_pki(folder)
    token_file = folder / "token"
    token_file.write_text(TOKEN)
    settings = ServingSettings(
        port=free_port(),
        grpc_port=0,
        tls_cert=pki.server_cert,
        tls_key=pki.server_key,
        client_ca=pki.ca,
        token_file=token_file,
    )
    with _serving(settings) as port:
        yield pki, port


def _secure_stub(pki: Pki, port: int, client: tuple[Path, Path] | None) -> tuple[Any, Any, Any]:
    stubs = load_externalscaler()
    cert, key = (None, None) if client is None else (client[0].read_bytes(), client[1].read_bytes())
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki.ca.read_bytes(), private_key=key, certificate_chain=cert
    )
    channel = grpc.secure_channel(f"127.0.0.1:{port}", credentials)
    return channel, stubs.pb2, stubs.pb2_grpc.ExternalScalerStub(channel)


def test_mutual_tls_accepts_a_client_certificate_of_the_ca(mtls: tuple[Pki, int]) -> None:
    pki, port = mtls
    channel, pb2, stub = _secure_stub(pki, port, (pki.client_cert, pki.client_key))
    with channel:
        # KEDA's external scaler sends no call metadata: the certificate is the credential.
        assert stub.IsActive(_ref(pb2), timeout=5).result is True


@pytest.mark.parametrize("who", ["no-certificate", "stranger"])
def test_mutual_tls_refuses_other_clients_even_with_the_token(
    mtls: tuple[Pki, int], who: str
) -> None:
    pki, port = mtls
    client = None if who == "no-certificate" else (pki.stranger_cert, pki.stranger_key)
    channel, pb2, stub = _secure_stub(pki, port, client)
    with channel, pytest.raises(grpc.RpcError) as caught:
        stub.IsActive(_ref(pb2), timeout=5, metadata=BEARER)
    # The handshake fails: the call never reaches the servicer.
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


# -- bounded error texts --------------------------------------------------------------------
def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def test_a_100kb_workload_name_answers_not_found_with_a_bounded_text(plain: Any) -> None:
    pb2, stub = plain
    error = _refused(lambda: stub.IsActive(_ref(pb2, "w" * 100_000), timeout=5, metadata=BEARER))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    details = error.details() or ""
    assert len(details) < 400
    # The caller is authenticated: it may see the configured names.
    assert "configured workloads: chat" in details


@pytest.mark.parametrize(
    ("metadata", "metric", "code"),
    [
        ({"workload": "chat", "metric": "m" * 100_000}, "", grpc.StatusCode.INVALID_ARGUMENT),
        ({"workload": "chat", "activationThreshold": "9" * 100_000}, "", None),
        ({"workload": "chat"}, "m" * 100_000, grpc.StatusCode.NOT_FOUND),
        ({"x" * 1000 + str(i): "v" for i in range(50)}, "", grpc.StatusCode.INVALID_ARGUMENT),
    ],
    ids=["metric-key", "threshold", "metric-name", "many-keys"],
)
def test_bad_metadata_answers_a_bounded_text(
    plain: Any, metadata: dict[str, str], metric: str, code: Any
) -> None:
    pb2, stub = plain
    ref = pb2.ScaledObjectRef(name="so", scalerMetadata=metadata)
    request = pb2.GetMetricsRequest(scaledObjectRef=ref, metricName=metric)
    if code is None:  # a threshold is read by IsActive
        error = _refused(lambda: stub.IsActive(ref, timeout=5, metadata=BEARER))
        code = grpc.StatusCode.INVALID_ARGUMENT
    else:
        error = _refused(lambda: stub.GetMetrics(request, timeout=5, metadata=BEARER))
    assert error.code() == code
    assert len(error.details() or "") < 400


def test_a_message_over_the_limit_is_refused_before_it_is_read(plain: Any) -> None:
    pb2, stub = plain
    error = _refused(
        lambda: stub.IsActive(_ref(pb2, "w" * (MAX_MESSAGE_BYTES + 1)), timeout=5, metadata=BEARER)
    )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


# -- namespaces and trigger metadata --------------------------------------------------------
def _rpcs(pb2: Any, stub: Any, ref: Any) -> dict[str, Any]:
    """Each RPC of ``ref``, with the token, as a call that returns its first answer."""
    request = pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas")
    return {
        "IsActive": lambda: stub.IsActive(ref, timeout=5, metadata=BEARER),
        "GetMetricSpec": lambda: stub.GetMetricSpec(ref, timeout=5, metadata=BEARER),
        "GetMetrics": lambda: stub.GetMetrics(request, timeout=5, metadata=BEARER),
        "StreamIsActive": lambda: next(stub.StreamIsActive(ref, timeout=5, metadata=BEARER)),
    }


SERVED = [("inference", "embed"), ("default", "chat"), ("", "chat")]
"""(namespace, workload) pairs answered: each workload in its own namespace, an unset one
read as `default`."""
REFUSED = [("other", "embed"), ("default", "embed"), ("", "embed"), ("inference", "chat")]


def test_a_workload_is_scaled_only_from_its_namespace(plain: Any) -> None:
    """The reported case: GetMetrics of `embed` (namespace `inference`) from a ScaledObject
    of namespace `other` answered its value, where HTTP answers 404."""
    pb2, stub = plain

    def calls(namespace: str, workload: str) -> dict[str, Any]:
        metadata = {"workload": workload}
        return _rpcs(pb2, stub, pb2.ScaledObjectRef(namespace=namespace, scalerMetadata=metadata))

    for namespace, workload in SERVED:
        for name, call in calls(namespace, workload).items():
            assert call() is not None, (name, namespace, workload)
    for namespace, workload in REFUSED:
        for name, call in calls(namespace, workload).items():
            error = _refused(call)
            assert error.code() == grpc.StatusCode.NOT_FOUND, (name, namespace, workload)
            # Answered as an unknown workload, as the External Metrics API answers it.
            expected = f"unknown workload '{workload}' in namespace '{namespace or 'default'}'"
            assert (error.details() or "").startswith(expected), (name, error.details())


def test_an_unknown_metric_in_the_trigger_is_refused_by_every_rpc_that_reads_it(
    plain: Any,
) -> None:
    """IsActive and StreamIsActive used to ignore the `metric` key GetMetricSpec refuses."""
    pb2, stub = plain
    ref = _ref(pb2)
    ref.scalerMetadata["metric"] = "nope"
    for name in ("GetMetricSpec", "IsActive", "StreamIsActive"):
        error = _refused(_rpcs(pb2, stub, ref)[name])
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert "`metric` must be one of" in (error.details() or ""), name
        assert "'nope'" in (error.details() or ""), name


# -- open streams -----------------------------------------------------------------------------
OLD_POOL = 32
"""Handler threads of the server before streams were limited: as many open streams stopped
every unary RPC."""


def _first(pool: ThreadPoolExecutor, call: Any) -> grpc.StatusCode:
    """OK once the stream's first answer arrives, else the code it was refused with."""
    try:
        pool.submit(next, call).result(timeout=30)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_unary_calls_answer_while_every_stream_slot_is_taken() -> None:
    """The reported case: 32 open StreamIsActive streams held the 32 handler threads and
    GetMetrics then hit its deadline; any client could open them."""
    settings = ServingSettings(port=free_port(), grpc_port=0)  # no token: anyone may call
    stubs = load_externalscaler()
    pb2 = stubs.pb2
    ref = _ref(pb2)
    limit = stream_limit(len(LEVELS))
    assert limit < OLD_POOL
    with (
        _serving(settings) as port,
        grpc.insecure_channel(f"127.0.0.1:{port}") as channel,
        ThreadPoolExecutor(4) as pool,
    ):
        stub = stubs.pb2_grpc.ExternalScalerStub(channel)
        streams = [stub.StreamIsActive(ref) for _ in range(OLD_POOL)]
        codes = [_first(pool, call) for call in streams]
        assert codes.count(grpc.StatusCode.OK) == limit
        assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == OLD_POOL - limit
        refused = _refused(lambda: next(stub.StreamIsActive(ref)))
        assert f"at most {limit} StreamIsActive streams" in (refused.details() or "")
        # Every slot is taken, and the unary RPCs still answer.
        request = pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas")
        assert stub.GetMetrics(request, timeout=30).metricValues
        assert stub.IsActive(ref, timeout=30).result is True
        # A closed stream gives its slot back (the server sees it within its poll interval).
        for call in streams:
            call.cancel()

        def reopened() -> bool:
            call = stub.StreamIsActive(ref)
            try:
                return _first(pool, call) == grpc.StatusCode.OK
            finally:
                call.cancel()

        wait_until(reopened, timeout=60, every=0.5)


def test_a_second_server_cannot_take_a_port_in_use() -> None:
    """With gRPC's default SO_REUSEPORT both would listen, each taking part of KEDA's
    connections: the second one's requests answered by a stale or other configuration."""
    from serving.api.grpc_server import GrpcServer

    settings = ServingSettings(port=free_port(), grpc_port=0)
    app = _app(settings)
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        port = runtime.grpc_port
        with pytest.raises(OSError, match=f"cannot bind the gRPC server to 127.0.0.1:{port}"):
            GrpcServer(runtime, host="127.0.0.1", port=port).start()
