"""The app over real HTTP (uvicorn on a free port) and a real gRPC channel.

History comes from an in-memory source and the model from an in-memory registry here; the
live test in ``tests/integration/test_serving_live.py`` feeds a real Prometheus and a real
MLflow store.
"""

from __future__ import annotations

import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from serving.wire.stubs import load_externalscaler
from tests.serving.grpc_client import with_token
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

LEVELS = {"chat": 40.0, "embed": 7.0, "idle": 0.0}
TOKEN = "s3cret-token"
GROUP = "/apis/external.metrics.k8s.io/v1beta1"


class Served:
    def __init__(self, app: Any, base: str, source: FrameSource, grpc_port: int) -> None:
        self.app = app
        self.base = base
        self.source = source
        self.grpc_port = grpc_port
        self.http = httpx.Client(base_url=base, timeout=5)

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    now = pd.Timestamp.now(tz="UTC")
    frame = history(LEVELS, now, 200)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS, min_replicas=0)))
    config = refresh_config(
        LEVELS, workload_specs=specs(LEVELS, min_replicas=0), max_staleness=3600.0
    )
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    settings = ServingSettings(port=free_port(), grpc_port=0, token_file=token_file)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.model_version is not None)
        assert runtime.grpc_port
        yield Served(app, f"http://127.0.0.1:{settings.port}", source, runtime.grpc_port)


# -- External Metrics API -------------------------------------------------------------------
def test_discovery_documents_are_exact_and_open(served: Served) -> None:
    group = {
        "name": "external.metrics.k8s.io",
        "versions": [{"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}],
        "preferredVersion": {
            "groupVersion": "external.metrics.k8s.io/v1beta1",
            "version": "v1beta1",
        },
    }
    response = served.http.get("/apis")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}
    response = served.http.get("/apis/external.metrics.k8s.io")
    assert response.json() == {"kind": "APIGroup", "apiVersion": "v1", **group}
    response = served.http.get(GROUP)
    assert response.status_code == 200
    body = response.json()
    assert body["kind"] == "APIResourceList"
    assert body["groupVersion"] == "external.metrics.k8s.io/v1beta1"
    assert [r["name"] for r in body["resources"]] == [
        "prewarm_desired_replicas",
        "prewarm_forecast_demand",
    ]
    assert body["resources"][0] == {
        "name": "prewarm_desired_replicas",
        "singularName": "",
        "namespaced": True,
        "kind": "ExternalMetricValueList",
        "verbs": ["get"],
    }


def test_external_metric_value_list(served: Served) -> None:
    # As the HPA sends it: KEDA's label beside ours, form-encoded by Go's url.Values.
    query = "labelSelector=scaledobject.keda.sh%2Fname%3Dmy-so%2Cworkload+in+%28chat%29"
    response = served.http.get(f"{GROUP}/namespaces/default/prewarm_desired_replicas?{query}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"kind", "apiVersion", "metadata", "items"}
    assert body["kind"] == "ExternalMetricValueList"
    assert body["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    assert body["metadata"] == {}
    (item,) = body["items"]
    assert set(item) == {"metricName", "metricLabels", "timestamp", "value"}
    assert item["metricName"] == "prewarm_desired_replicas"
    assert item["metricLabels"] == {"workload": "chat"}
    assert item["timestamp"].endswith("Z") and len(item["timestamp"]) == 20
    forecast = served.runtime.store.current.forecast("chat")
    assert item["value"] == str(forecast.desired_replicas)

    response = served.http.get(
        f"{GROUP}/namespaces/default/prewarm_forecast_demand",
        params={"labelSelector": "workload=chat"},
    )
    value = response.json()["items"][0]["value"]
    assert value.endswith(("m", "u", "n")) or value.isdigit()


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        (
            f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3Dnope",
            404,
            "NotFound",
        ),
        (f"{GROUP}/namespaces/default/not_a_metric?labelSelector=workload%3Dchat", 404, "NotFound"),
        (
            f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload+in+%28chat",
            400,
            "BadRequest",
        ),
        (
            f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=app%3Dllm",
            400,
            "BadRequest",
        ),
        (f"{GROUP}/namespaces/default/prewarm_desired_replicas", 400, "BadRequest"),
    ],
    ids=[
        "unknown-workload",
        "unknown-metric",
        "malformed-selector",
        "no-workload-label",
        "no-selector",
    ],
)
def test_errors_are_metav1_status(served: Served, path: str, code: int, reason: str) -> None:
    response = served.http.get(path)
    assert response.status_code == code
    body = response.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure"
    assert body["reason"] == reason and body["code"] == code
    assert body["message"]


# -- KEDA metrics-api -----------------------------------------------------------------------
def test_keda_forecast_needs_the_token_while_discovery_stays_open(served: Served) -> None:
    path = "/v1/workloads/chat/forecast"
    missing = served.http.get(path)
    wrong = served.http.get(path, headers={"Authorization": "Bearer nope"})
    basic = served.http.get(path, headers={"Authorization": f"Basic {TOKEN}"})
    for response in (missing, wrong, basic):
        assert response.status_code == 401
        assert response.json()["reason"] == "Unauthorized"
        assert TOKEN not in response.text
    assert served.http.get("/v1/workloads").status_code == 401
    for open_path in ("/apis", "/apis/external.metrics.k8s.io", GROUP, "/healthz", "/metrics"):
        assert served.http.get(open_path).status_code == 200, open_path


def test_keda_forecast_document(served: Served) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = served.http.get("/v1/workloads/chat/forecast", headers=auth).json()
    for key in (
        "workload",
        "desiredReplicas",
        "forecastDemand",
        "quantile",
        "leadTimeSeconds",
        "generatedAt",
        "dataAgeSeconds",
        "modelVersion",
    ):
        assert key in body, key
    assert body["workload"] == "chat"
    assert body["modelVersion"] == "1"
    assert body["quantile"] == 0.9
    assert 0 <= body["dataAgeSeconds"] < 3600
    assert body["desiredReplicas"] >= 1 and body["forecastDemand"] > 30
    assert served.http.get("/v1/workloads/nope/forecast", headers=auth).status_code == 404

    listing = served.http.get("/v1/workloads", headers=auth).json()
    assert [w["workload"] for w in listing["workloads"]] == ["chat", "embed", "idle"]
    assert all(w["status"] == "fresh" and w["reason"] is None for w in listing["workloads"])


# -- health and metrics ---------------------------------------------------------------------
def test_health_ready_and_metrics(served: Served) -> None:
    assert served.http.get("/healthz").json() == {"status": "ok"}
    ready = served.http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["fresh"] == ["chat", "embed", "idle"]
    assert ready.json()["model"]["version"] == "1"
    text = served.http.get("/metrics").text
    for needle in (
        'prewarm_desired_replicas{workload="chat"}',
        'prewarm_forecast_demand{workload="embed"}',
        'prewarm_data_age_seconds{workload="chat"}',
        'prewarm_workload_fresh{workload="chat"} 1.0',
        "prewarm_refresh_duration_seconds_count",
        'prewarm_model_info{name="prewarm-test",version="1"} 1.0',
    ):
        assert needle in text, needle


# -- gRPC external scaler -------------------------------------------------------------------
@pytest.fixture(scope="module")
def scaler(served: Served) -> Iterator[Any]:
    stubs = load_externalscaler()
    with grpc.insecure_channel(f"127.0.0.1:{served.grpc_port}") as channel:
        yield stubs.pb2, stubs.pb2_grpc.ExternalScalerStub(with_token(channel, TOKEN))


def test_grpc_metric_spec_metrics_and_activity(served: Served, scaler: Any) -> None:
    pb2, stub = scaler
    ref = pb2.ScaledObjectRef(name="so", namespace="default", scalerMetadata={"workload": "chat"})
    spec = stub.GetMetricSpec(ref, timeout=5)
    (metric,) = spec.metricSpecs
    assert metric.metricName == "prewarm_desired_replicas"
    assert metric.targetSizeFloat == 1.0 and metric.targetSize == 1
    demand_ref = pb2.ScaledObjectRef(
        name="so",
        namespace="default",
        scalerMetadata={"workload": "chat", "metric": "forecast_demand"},
    )
    (demand_spec,) = stub.GetMetricSpec(demand_ref, timeout=5).metricSpecs
    assert demand_spec.targetSizeFloat == pytest.approx(10.0 * 0.8)
    assert demand_spec.targetSize == 8

    values = stub.GetMetrics(
        pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas"),
        timeout=5,
    )
    (value,) = values.metricValues
    expected = served.runtime.store.current.forecast("chat").desired_replicas
    assert value.metricValueFloat == expected and value.metricValue == expected
    assert stub.IsActive(ref, timeout=5).result is True
    # The forecaster's noise floor keeps an idle series slightly above zero; the trigger's
    # activation threshold says how much demand is worth waking up for.
    idle = pb2.ScaledObjectRef(
        name="so", scalerMetadata={"workload": "idle", "activationThreshold": "1"}
    )
    assert stub.IsActive(idle, timeout=5).result is False


def test_grpc_errors(scaler: Any) -> None:
    pb2, stub = scaler
    unknown = pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "nope"})
    with pytest.raises(grpc.RpcError) as caught:
        stub.IsActive(unknown, timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nope" in (caught.value.details() or "")
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetrics(pb2.GetMetricsRequest(scaledObjectRef=unknown), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetMetricSpec(pb2.ScaledObjectRef(name="so"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_stream_is_active_pushes_on_change(served: Served, scaler: Any) -> None:
    """Traffic appears for the idle workload: the stream pushes `true` before any poll."""
    pb2, stub = scaler
    ref = pb2.ScaledObjectRef(
        name="so", scalerMetadata={"workload": "idle", "activationThreshold": "1"}
    )
    stream = stub.StreamIsActive(ref, timeout=30)
    received: list[bool] = []

    def read() -> None:
        for message in stream:
            received.append(message.result)
            if message.result:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until(lambda: received == [False], timeout=5)
    later = pd.Timestamp.now(tz="UTC") + pd.Timedelta(seconds=30)
    served.source.extend(later, {"chat": 40.0, "embed": 7.0, "idle": 25.0})
    reader.join(timeout=20)
    stream.cancel()
    assert received == [False, True]


# -- TLS ------------------------------------------------------------------------------------
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _pki(folder: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all from openssl."""
    p = {
        name: folder / name
        for name in (
            "ca.key",
            "ca.crt",
            "server.key",
            "server.csr",
            "server.crt",
            "client.key",
            "client.csr",
            "client.crt",
            "ext.cnf",
            "other.key",
            "other.crt",
        )
    }
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(p["ca.key"]),
        "-out",
        str(p["ca.crt"]),
    )
    p["ext.cnf"].write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who in ("server", "client"):
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            f"/CN={who}",
            "-keyout",
            str(p[f"{who}.key"]),
            "-out",
            str(p[f"{who}.csr"]),
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            str(p[f"{who}.csr"]),
            "-CA",
            str(p["ca.crt"]),
            "-CAkey",
            str(p["ca.key"]),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            str(p["ext.cnf"]),
            "-out",
            str(p[f"{who}.crt"]),
        )
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=stranger",
        "-keyout",
        str(p["other.key"]),
        "-out",
        str(p["other.crt"]),
    )
    return p


def test_https_with_client_certificate_check(tmp_path: Path) -> None:
    pki = _pki(tmp_path)
    now = pd.Timestamp.now(tz="UTC")
    frame = history({"chat": 40.0}, now, 100)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs({"chat": 40.0})))
    config = refresh_config({"chat": 40.0}, max_staleness=3600.0)
    settings = ServingSettings(
        port=free_port(),
        grpc_port=None,
        tls_cert=pki["server.crt"],
        tls_key=pki["server.key"],
        client_ca=pki["ca.crt"],
    )
    source = FrameSource(frame)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    base = f"https://127.0.0.1:{settings.port}"

    def client(cert: str | None) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(pki["ca.crt"]))
        if cert is not None:
            context.load_cert_chain(str(pki[f"{cert}.crt"]), str(pki[f"{cert}.key"]))
        return httpx.Client(verify=context, timeout=5)

    with running(app, lambda a: uvicorn_config(a, settings)):
        # The aggregator's way: verify the server against the caBundle, present a client cert.
        with client("client") as aggregator:
            assert aggregator.get(f"{base}{GROUP}").status_code == 200
        # The kubelet's probes present no certificate and still get an answer.
        with client(None) as kubelet:
            assert kubelet.get(f"{base}/healthz").status_code == 200
        # A certificate from another CA is refused during the handshake.
        with client("other") as stranger, pytest.raises(httpx.HTTPError):
            stranger.get(f"{base}{GROUP}")
        # Plain HTTP is not served.
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{settings.port}/healthz", timeout=2)


# -- cached replies -------------------------------------------------------------------------
def test_metric_bodies_are_the_documents_of_the_current_forecast(served: Served) -> None:
    from datetime import UTC, datetime

    from serving.wire import k8s

    for metric in ("prewarm_desired_replicas", "prewarm_forecast_demand"):
        response = served.http.get(
            f"{GROUP}/namespaces/default/{metric}?labelSelector=workload%3Dembed"
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert int(response.headers["content-length"]) == len(response.content)
        # The body is the one of the forecast the snapshot held when the request was read.
        forecast = served.runtime.store.current.forecast("embed")
        value = (
            float(forecast.desired_replicas)
            if metric == "prewarm_desired_replicas"
            else forecast.forecast_demand
        )
        item = k8s.ExternalMetricValue(metric, value, forecast.generated_at, {"workload": "embed"})
        assert response.content == k8s.encode_json(k8s.external_metric_value_list([item]))

    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = served.http.get("/v1/workloads/embed/forecast", headers=auth).json()
    forecast = served.runtime.store.current.forecast("embed")
    age = (datetime.now(UTC) - forecast.origin).total_seconds()
    assert body["dataAgeSeconds"] == pytest.approx(age, abs=2.0)
    assert body["desiredReplicas"] == forecast.desired_replicas
    assert body["forecastDemand"] == forecast.forecast_demand
    assert body["origin"] == k8s.format_time(forecast.origin)
    assert body["demandTarget"] == pytest.approx(8.0)


def test_paths_off_the_direct_route_still_answer_as_fastapi_does(served: Served) -> None:
    extra = served.http.get(
        f"{GROUP}/namespaces/default/prewarm_desired_replicas/more?labelSelector=workload%3Dchat"
    )
    assert extra.status_code == 404 and extra.json()["reason"] == "NotFound"
    empty = served.http.get("/v1/workloads//forecast", headers={"Authorization": f"Bearer {TOKEN}"})
    assert empty.status_code == 404
    post = served.http.post(f"{GROUP}/namespaces/default/prewarm_desired_replicas")
    assert post.status_code == 405 and post.json()["reason"] == "MethodNotAllowed"


def test_a_stalled_refresher_turns_into_503_at_read_time() -> None:
    """No snapshot is published after the first one: the cached reply must still expire."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from serving.engine.snapshot import Snapshot

    now = pd.Timestamp.now(tz="UTC")
    levels = {"chat": 40.0}
    frame = history(levels, now, 100)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(levels)))
    # One refresh, then the refresher sleeps for an hour: as good as stalled.
    config = refresh_config(levels, max_staleness=3600.0, refresh_interval=3600.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    metric = f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3Dchat"
    keda_path = "/v1/workloads/chat/forecast"
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):
        store = app.state.runtime.store
        wait_until(lambda: store.current.model_version is not None)
        current = store.current
        # The data behind the forecast turns 3600 s old 1.5 s from now.
        old = current.states["chat"]
        origin = datetime.now(UTC) - timedelta(seconds=3600 - 1.5)
        aged = replace(old, forecast=replace(old.forecast, origin=origin))
        store.publish(
            Snapshot(
                states={"chat": aged},
                max_staleness=current.max_staleness,
                generated_at=current.generated_at,
                model_name=current.model_name,
                model_version=current.model_version,
                sequence=current.sequence + 1,
            )
        )
        assert http.get(metric).status_code == 200
        assert http.get(keda_path).status_code == 200
        time.sleep(2.0)
        assert store.current.states["chat"] is aged  # nothing was published meanwhile
        stale = http.get(metric)
        assert stale.status_code == 503, stale.text
        assert stale.json()["reason"] == "ServiceUnavailable"
        assert "max_staleness 3600 s" in stale.json()["message"]
        assert http.get(keda_path).status_code == 503
        scraped = http.get("/metrics").text
        assert (
            'prewarm_unavailable_responses_total{api="external_metrics",reason="stale",'
            'workload="chat"} 1.0' in scraped
        )
