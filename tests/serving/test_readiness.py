"""Readiness protects the cluster: ``/readyz`` stays 200 through a data outage and while no
model is loaded, the metric answers the hold error, and the unauthenticated body names only
categories, never the source's address, query or error text (real uvicorn over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
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

LEVELS = {"chat": 40.0}
STEP = 2
MAX_STALENESS = 6.0
METRIC = (
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
    "?labelSelector=workload%3Dchat"
)
# What a failing Prometheus source says: its address and the query must stay in the log.
OUTAGE = "connection refused: http://prometheus.internal:9090 sum(rate(secret_total[5m]))"
INTERNALS = ("prometheus.internal", "9090", "secret_total")


class RegistryDown(DictRegistry):
    """A registry whose every lookup fails the way an unreachable MLflow server does."""

    def champion_version(self, name: str) -> str | None:
        raise ConnectionError("http://mlflow.internal:5000/api/2.0/mlflow: connection refused")


def _serve(registry: DictRegistry, source: FrameSource) -> Any:
    config = refresh_config(LEVELS, max_staleness=MAX_STALENESS, history_window=900.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    return app, settings


@pytest.fixture()
def frame() -> pd.DataFrame:
    return history(LEVELS, pd.Timestamp.now(tz="UTC"), 600, step=STEP)


@pytest.fixture()
def fresh_then_down(frame: pd.DataFrame) -> Iterator[tuple[httpx.Client, FrameSource]]:
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    app, settings = _serve(registry, source)
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):

        def fresh() -> bool:
            # data keeps arriving until the outage starts
            source.extend(pd.Timestamp.now(tz="UTC"), LEVELS, step=STEP)
            return http.get("/readyz").json()["fresh"] == ["chat"]

        wait_until(fresh, timeout=60, every=0.2)
        assert http.get(METRIC).status_code == 200
        yield http, source


@pytest.mark.slow
def test_ready_through_a_data_outage_while_the_metric_holds(
    fresh_then_down: tuple[httpx.Client, FrameSource],
) -> None:
    http, source = fresh_then_down
    source.fail = OUTAGE
    wait_until(lambda: http.get(METRIC).status_code == 503, timeout=MAX_STALENESS + 30, every=0.2)
    refused = http.get(METRIC).json()
    assert (refused["kind"], refused["reason"]) == ("Status", "ServiceUnavailable")
    assert "max_staleness" in refused["message"]

    ready = http.get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] is True and body["fresh"] == []
    assert body["stale"] == {"chat": "stale"}
    assert body["model"]["version"] == "1" and body["model"]["problem"] is None
    for internal in INTERNALS:
        assert internal not in ready.text, internal
    # The reason, with the source's error, is where an operator looks next.
    (listed,) = http.get("/v1/workloads").json()["workloads"]
    assert listed["status"] == "stale" and OUTAGE in listed["reason"]
    assert 'prewarm_workload_fresh{workload="chat"} 0.0' in http.get("/metrics").text


def test_ready_without_a_model_and_says_only_the_category(frame: pd.DataFrame) -> None:
    source = FrameSource(frame)
    registry = RegistryDown("prewarm-test")
    app, settings = _serve(registry, source)
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):
        runtime = app.state.runtime
        wait_until(lambda: runtime.watcher.last_error is not None, timeout=30)
        wait_until(lambda: runtime.store.current.generated_at is not None, timeout=30)
        ready = http.get("/readyz")
        assert ready.status_code == 200
        body = ready.json()
        assert body["ready"] is True
        # A poll may be under way: how long it has run is test_registry_outage's concern.
        assert isinstance(body["model"].pop("registryCallRunningSeconds"), float)
        assert body["model"] == {
            "name": "prewarm-test",
            "version": None,
            "problem": "no_model",
            "rejectedVersions": [],
        }
        assert body["stale"] == {"chat": "no_model"}
        assert "mlflow.internal" not in ready.text and "5000" not in ready.text
        refused = http.get(METRIC)
        assert refused.status_code == 503
        assert refused.json()["reason"] == "ServiceUnavailable"


class ArtifactsDown(DictRegistry):
    """A registry whose loads fail, as with the artifact store unreachable, while ``down``."""

    down = True

    def load(self, name: str, version: str) -> Any:
        if self.down:
            raise ConnectionError("http://minio.internal:9000/mlflow: connection refused")
        return super().load(name, version)


def test_a_version_that_failed_to_load_is_served_once_it_loads(frame: pd.DataFrame) -> None:
    source = FrameSource(frame)
    registry = ArtifactsDown("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    app, settings = _serve(registry, source)
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):
        runtime = app.state.runtime
        wait_until(lambda: http.get("/readyz").json()["model"]["rejectedVersions"] == ["1"])
        ticks = runtime.refresher.ticks
        wait_until(lambda: runtime.refresher.ticks >= ticks + 2, timeout=30)
        ready = http.get("/readyz").json()
        assert ready["model"]["problem"] == "no_model" and ready["stale"] == {"chat": "no_model"}
        assert "minio.internal" not in http.get("/readyz").text
        refused = http.get(METRIC)
        assert refused.status_code == 503
        assert "version 1 rejected" in refused.json()["message"]

        registry.down = False  # the artifact store is back

        def served() -> bool:
            source.extend(pd.Timestamp.now(tz="UTC"), LEVELS, step=STEP)
            return http.get(METRIC).status_code == 200

        wait_until(served, timeout=120, every=0.2)
        model = http.get("/readyz").json()["model"]
        assert isinstance(model.pop("registryCallRunningSeconds"), float)
        assert model == {
            "name": "prewarm-test",
            "version": "1",
            "problem": None,
            "rejectedVersions": [],
        }
        metrics = http.get("/metrics").text
        assert 'prewarm_model_reloads_total{result="rejected"} 1.0' in metrics
        assert 'prewarm_model_reloads_total{result="loaded"} 1.0' in metrics
