"""``prewarm serve --shadow`` over real HTTP and gRPC: plans are exported, never answered.

Every autoscaling consumer (External Metrics API, KEDA metrics-api, KEDA gRPC scaler) gets
the hold error stale data gets, while ``/metrics`` carries the plan the service would serve.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from serving.wire.stubs import load_externalscaler
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
GROUP = "/apis/external.metrics.k8s.io/v1beta1"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class Shadow:
    def __init__(self, app: Any, port: int, logs: list[str]) -> None:
        self.app = app
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)
        self.logs = logs

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime


@pytest.fixture(scope="module")
def shadow() -> Iterator[Shadow]:
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=3600.0)
    settings = ServingSettings(port=free_port(), grpc_port=0, shadow=True)
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    records = _Records()
    logging.getLogger("serving.api.app").addHandler(records)
    try:
        with running(app, lambda a: uvicorn_config(a, settings)):
            runtime = app.state.runtime
            wait_until(lambda: all(s.forecast for s in runtime.store.current.states.values()))
            yield Shadow(app, settings.port, records.messages)
    finally:
        logging.getLogger("serving.api.app").removeHandler(records)


def _hold(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"
    assert "shadow mode" in body["message"]


def test_every_http_consumer_gets_the_hold_error(shadow: Shadow) -> None:
    for metric in ("prewarm_desired_replicas", "prewarm_forecast_demand"):
        for name in LEVELS:
            path = f"{GROUP}/namespaces/default/{metric}?labelSelector=workload%3D{name}"
            _hold(shadow.http.get(path))
    for name in LEVELS:
        _hold(shadow.http.get(f"/v1/workloads/{name}/forecast"))
    listing = shadow.http.get("/v1/workloads").json()["workloads"]
    assert [w["desiredReplicas"] for w in listing] == [None, None]
    assert all("shadow mode" in w["reason"] for w in listing)


def test_grpc_scaler_gets_unavailable(shadow: Shadow) -> None:
    stubs = load_externalscaler()
    pb2 = stubs.pb2
    with grpc.insecure_channel(f"127.0.0.1:{shadow.runtime.grpc_port}") as channel:
        stub = stubs.pb2_grpc.ExternalScalerStub(channel)
        ref = pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "chat"})
        calls = (
            lambda: stub.IsActive(ref, timeout=5),
            lambda: stub.GetMetrics(
                pb2.GetMetricsRequest(scaledObjectRef=ref, metricName="prewarm_desired_replicas"),
                timeout=5,
            ),
            lambda: next(iter(stub.StreamIsActive(ref, timeout=5))),
        )
        for call in calls:
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "shadow mode" in (caught.value.details() or "")


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_carry_the_plan_readyz_and_log_say_shadow(shadow: Shadow) -> None:
    shadow.http.get(
        f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3Dchat"
    )
    snapshot = shadow.runtime.store.current
    samples = _samples(shadow.http.get("/metrics").text)

    def value(metric: str, **labels: str) -> float:
        return samples[(metric, frozenset(labels.items()))]

    for name in LEVELS:
        forecast = snapshot.states[name].forecast
        assert value("prewarm_desired_replicas", workload=name) == forecast.desired_replicas
        assert value("prewarm_forecast_demand", workload=name) == forecast.forecast_demand
        assert value("prewarm_lead_time_seconds", workload=name) == 30.0
        assert value("prewarm_workload_fresh", workload=name) == 1.0
        assert value("prewarm_data_age_seconds", workload=name) >= 0.0
        band = {
            q: value("prewarm_forecast_quantile", workload=name, quantile=q) for q in ("0.5", "0.9")
        }
        # The band holds the served value at the plan's quantile, and quantiles are monotone.
        assert band["0.9"] == forecast.forecast_demand >= band["0.5"]
    assert value("prewarm_shadow_mode") == 1.0
    assert value("prewarm_model_info", name="prewarm-test", version="1") == 1.0
    refusals = value(
        "prewarm_unavailable_responses_total",
        api="external_metrics",
        workload="chat",
        reason="shadow",
    )
    assert refusals >= 1
    ready = shadow.http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["mode"] == "shadow"
    assert any("shadow mode" in message for message in shadow.logs)


def test_explain_shows_the_plan_and_the_shadow_refusal(shadow: Shadow) -> None:
    body = shadow.http.get("/v1/workloads/chat/explain").json()
    forecast = shadow.runtime.store.current.states["chat"].forecast
    assert body["mode"] == "shadow" and body["served"] is False
    assert body["refused"]["cause"] == "shadow"
    assert body["replicas"]["desiredReplicas"] == forecast.desired_replicas
