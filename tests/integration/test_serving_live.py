"""``prewarm serve`` end to end: a real Prometheus (backfilled history plus a live scrape of
a small exporter), a model from a real MLflow store, the real CLI process, real HTTP and gRPC.

Failure paths: Prometheus stopped mid-run (503 / UNAVAILABLE after ``max_staleness``, back
after a restart), and a corrupt new model version (the old one keeps serving).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client import Gauge as LiveGauge

import tests.integration.prometheus as prom
from serving.wire.stubs import load_externalscaler
from tests.integration.prometheus import Gauge, PrometheusServer, free_port
from tests.serving.support import fit_planner, specs, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEP = 2
LEVELS = {"chat": 40.0, "embed": 7.0}
MODEL = "prewarm-live"
GROUP = "/apis/external.metrics.k8s.io/v1beta1"
MAX_STALENESS = 8


def _backfill_frame(now: float) -> pd.DataFrame:
    end = math.floor(now / STEP) * STEP - STEP
    times = pd.to_datetime(range(end - 20 * 60, end + 1, STEP), unit="s", utc=True)
    parts = [
        pd.DataFrame({"series": name, "timestamp": times, "value": level})
        for name, level in LEVELS.items()
    ]
    return pd.concat(parts, ignore_index=True)


def _register(tracking_uri: str, artifacts: Path, planner: Any, example: pd.DataFrame) -> str:
    import mlflow
    from mlflow import MlflowClient

    from training.pyfunc import to_naive_utc

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    if mlflow.get_experiment_by_name("serving-live") is None:
        mlflow.create_experiment("serving-live", artifact_location=artifacts.as_uri())
    mlflow.set_experiment("serving-live")
    with mlflow.start_run():
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=planner,
            input_example=to_naive_utc(example),
            pip_requirements=["pandas"],
        )
    version = mlflow.register_model(info.model_uri, MODEL)
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    client.set_registered_model_alias(MODEL, "champion", version.version)
    return str(version.version)


class Live:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    base: str
    grpc_port: int
    prometheus: PrometheusServer
    process: subprocess.Popen[bytes]
    log: Path
    tracking_uri: str
    artifacts: Path
    frame: pd.DataFrame


@pytest.fixture(scope="module")
def live(prometheus_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("serving-live")
    # A tiny exporter the test's Prometheus scrapes every second: the live part of the data.
    registry = CollectorRegistry()
    demand = LiveGauge("demand", "Requests per second", ["workload"], registry=registry)
    for name, level in LEVELS.items():
        demand.labels(name).set(level)
    exporter_port = free_port()
    exporter, _ = start_http_server(exporter_port, addr="127.0.0.1", registry=registry)
    frame = _backfill_frame(time.time())
    families = [
        Gauge(
            "demand",
            [
                (
                    {"workload": name},
                    [
                        (t.timestamp(), v)
                        for t, v in zip(part["timestamp"], part["value"], strict=True)
                    ],
                )
                for name, part in frame.groupby("series")
            ],
        )
    ]
    prometheus = prometheus_factory(
        families,
        scrape_configs=[
            {
                "job_name": "exporter",
                "scrape_interval": "1s",
                "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
            }
        ],
        extra_flags=["--query.lookback-delta=5s"],
    )

    tracking_uri = f"sqlite:///{folder / 'mlflow.db'}"
    artifacts = folder / "artifacts"
    workload_specs = specs(LEVELS, cold_start=10.0, max_replicas=20)
    version = _register(tracking_uri, artifacts, fit_planner(frame, workload_specs), frame.tail(40))
    assert version == "1"

    config = {
        "source": {
            "type": "prometheus",
            "url": prometheus.url,
            "step": f"{STEP}s",
            "timeout": "2s",
            "retries": 0,
        },
        "workloads": [
            {
                "name": name,
                "demand": f'max(demand{{workload="{name}"}})',
                "capacity": {
                    "capacity_per_replica": 10,
                    "cold_start": "10s",
                    "target_utilization": 0.8,
                    "min_replicas": 1,
                    "max_replicas": 20,
                    "quantile": 0.9,
                },
            }
            for name in LEVELS
        ],
        "mlflow": {"tracking_uri": tracking_uri, "registered_model": MODEL},
        "serving": {
            "refresh_interval": "1s",
            "max_staleness": f"{MAX_STALENESS}s",
            "poll_model_every": "1s",
        },
    }
    config_path = folder / "prewarm.yaml"
    config_path.write_text(yaml.safe_dump(config))
    port, grpc_port = free_port(), free_port()
    log = folder / "serve.log"
    env = {**os.environ, "PREWARM_MLFLOW_TRACKING_URI": tracking_uri}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from prewarm.cli import main; main()",
                "serve",
                "--config",
                str(config_path),
                "--port",
                str(port),
                "--grpc-port",
                str(grpc_port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=folder,
        )
    state = Live(
        base=f"http://127.0.0.1:{port}",
        grpc_port=grpc_port,
        prometheus=prometheus,
        process=process,
        log=log,
        tracking_uri=tracking_uri,
        artifacts=artifacts,
        frame=frame,
    )
    try:
        wait_until(lambda: _ready(state), timeout=60, every=0.25)
        yield state
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        exporter.shutdown()


def _ready(state: Live) -> bool:
    if state.process.poll() is not None:
        raise AssertionError(f"prewarm serve exited:\n{state.log.read_text()[-3000:]}")
    try:
        return bool(httpx.get(f"{state.base}/readyz", timeout=2).json()["fresh"])
    except httpx.HTTPError:
        return False


def _metric(state: Live, workload: str = "chat") -> httpx.Response:
    return httpx.get(
        f"{state.base}{GROUP}/namespaces/default/prewarm_desired_replicas",
        params={"labelSelector": f"workload={workload}"},
        timeout=5,
    )


def _grpc_metrics(state: Live) -> Any:
    stubs = load_externalscaler()
    with grpc.insecure_channel(f"127.0.0.1:{state.grpc_port}") as channel:
        stub = stubs.pb2_grpc.ExternalScalerStub(channel)
        ref = stubs.pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "chat"})
        return stub.GetMetrics(stubs.pb2.GetMetricsRequest(scaledObjectRef=ref), timeout=5)


def test_serves_the_champion_forecast_from_live_data(live: Live) -> None:
    response = _metric(live)
    assert response.status_code == 200, response.text
    (item,) = response.json()["items"]
    # 40 req/s at 10 per replica x 0.8 utilization: 5 replicas, more at the 0.9 quantile.
    assert 5 <= int(item["value"]) <= 7
    keda = httpx.get(f"{live.base}/v1/workloads/embed/forecast", timeout=5).json()
    assert keda["modelVersion"] == "1"
    assert keda["dataAgeSeconds"] < MAX_STALENESS
    assert 6.5 < keda["forecastDemand"] < 9
    (value,) = _grpc_metrics(live).metricValues
    assert value.metricValueFloat == int(item["value"])
    metrics = httpx.get(f"{live.base}/metrics", timeout=5).text
    assert 'prewarm_model_info{name="prewarm-live",version="1"} 1.0' in metrics


def test_corrupt_new_version_keeps_the_old_one_serving(live: Live) -> None:
    planner = fit_planner(live.frame, specs(LEVELS, cold_start=10.0, max_replicas=20))
    before = {p: p.stat().st_mtime for p in live.artifacts.rglob("python_model.pkl")}
    version = _register(live.tracking_uri, live.artifacts, planner, live.frame.tail(40))
    (new_pickle,) = [p for p in live.artifacts.rglob("python_model.pkl") if p not in before]
    new_pickle.write_bytes(b"this is not a pickle")  # the version's artifact is corrupt

    def rejected() -> bool:
        body = httpx.get(f"{live.base}/readyz", timeout=5).json()
        return version in body["model"]["rejectedVersions"]

    wait_until(rejected, timeout=30, every=0.5)
    response = _metric(live)
    assert response.status_code == 200
    keda = httpx.get(f"{live.base}/v1/workloads/chat/forecast", timeout=5).json()
    assert keda["modelVersion"] == "1"
    metrics = httpx.get(f"{live.base}/metrics", timeout=5).text
    assert 'prewarm_model_reloads_total{result="rejected"} 1.0' in metrics


def test_prometheus_down_gives_503_then_recovers(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _metric(live).status_code == 200
    port = live.prometheus.port
    forecast = httpx.get(f"{live.base}/v1/workloads/chat/forecast", timeout=5).json()
    age = forecast["dataAgeSeconds"]
    live.prometheus.stop()
    stopped = time.monotonic()
    wait_until(lambda: _metric(live).status_code == 503, timeout=MAX_STALENESS + 15, every=0.5)
    # Never before the data was max_staleness old: its age when Prometheus stopped (how old
    # depends on the machine's load, so it is read, not assumed) plus the time since; 1 s for
    # the moments between reading the age and stopping Prometheus.
    assert age + time.monotonic() - stopped >= MAX_STALENESS - 1
    body = _metric(live).json()
    assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
    assert body["code"] == 503 and "max_staleness" in body["message"]
    with pytest.raises(grpc.RpcError) as caught:
        _grpc_metrics(live)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    # Still ready: the pod stays in the Service and the APIService available; the category
    # only, the source's address stays out of the unauthenticated body.
    ready = httpx.get(f"{live.base}/readyz", timeout=5)
    assert ready.status_code == 200
    assert ready.json()["stale"]["chat"] == "stale"
    assert str(port) not in ready.text
    listed = httpx.get(f"{live.base}/v1/workloads", timeout=5).json()["workloads"]
    assert "source error" in {w["workload"]: w for w in listed}["chat"]["reason"]
    metrics = httpx.get(f"{live.base}/metrics", timeout=5).text
    assert 'prewarm_workload_fresh{workload="chat"} 0.0' in metrics
    assert (
        'prewarm_unavailable_responses_total{api="external_metrics",reason="stale",'
        'workload="chat"}' in metrics
    )
    assert 'prewarm_source_errors_total{workload="chat"}' in metrics

    # Same address again: the server's config keeps pointing at it.
    monkeypatch.setattr(prom, "free_port", lambda: port)
    live.prometheus.start()
    wait_until(lambda: _metric(live).status_code == 200, timeout=30, every=0.5)
    assert "chat" in httpx.get(f"{live.base}/readyz", timeout=5).json()["fresh"]
