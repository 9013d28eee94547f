"""A registry that hangs holds neither the refresh nor the shutdown up (real uvicorn over HTTP).

MLflow's client retries a dead server for minutes per call and waits up to two minutes on
one that accepts connections and never answers. The registry here answers its first look-up,
then hangs on every later one until the test lets it go: the one fake of this file, to
inject that failure.
"""

from __future__ import annotations

import threading
from datetime import timedelta

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
    specs,
    start_server,
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


class HangingRegistry(DictRegistry):
    """Answers the first alias look-up; every later one hangs until ``release`` is set."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.lookups = 0
        self.hanging = threading.Event()
        self.release = threading.Event()

    def champion_version(self, name: str) -> str | None:
        self.lookups += 1
        if self.lookups > 1:
            self.hanging.set()
            self.release.wait()
        return super().champion_version(name)


def test_data_keeps_being_served_fresh_while_the_registry_hangs_and_shutdown_is_prompt() -> None:
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 600, step=STEP)
    source = FrameSource(frame)
    registry = HangingRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=MAX_STALENESS, history_window=900.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    server, thread = start_server(app, lambda a: uvicorn_config(a, settings))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http:
            wait_until(registry.hanging.is_set, timeout=30)
            hung_at = pd.Timestamp.now(tz="UTC").to_pydatetime()
            store = app.state.runtime.store

            def refreshed_past_max_staleness() -> bool:
                source.extend(pd.Timestamp.now(tz="UTC"), LEVELS, step=STEP)
                last = store.current.states["chat"].last_data
                return last is not None and last > hung_at + timedelta(seconds=MAX_STALENESS)

            # Data that arrived more than max_staleness after the look-up began to hang was
            # fetched: without the fix, the workload would be stale by now.
            wait_until(refreshed_past_max_staleness, timeout=MAX_STALENESS + 60, every=0.2)
            assert registry.lookups == 2 and not registry.release.is_set()  # still hanging
            assert http.get(METRIC).status_code == 200
            forecast = http.get("/v1/workloads/chat/forecast").json()
            assert forecast["modelVersion"] == "1"
            assert forecast["dataAgeSeconds"] < MAX_STALENESS
            ready = http.get("/readyz").json()
            assert ready["fresh"] == ["chat"] and ready["model"]["version"] == "1"
            # The hang shows: the call has run at least as long as data kept arriving since.
            assert ready["model"]["registryCallRunningSeconds"] >= MAX_STALENESS
            running = _gauge(http.get("/metrics").text, "prewarm_registry_call_running_seconds")
            assert running >= MAX_STALENESS

        # SIGTERM's path: uvicorn stops and the lifespan stops the refresher. Kubernetes
        # kills the pod 30 s after SIGTERM; without the fix this waited for the registry.
        server.should_exit = True
        thread.join(timeout=20)
        assert not thread.is_alive(), "shutdown waited for the hanging registry look-up"
    finally:
        registry.release.set()
        server.should_exit = True
        thread.join(timeout=15)


def _gauge(exposition: str, name: str) -> float:
    [value] = [line.split()[1] for line in exposition.splitlines() if line.startswith(name + " ")]
    return float(value)


def test_refreshes_go_on_without_a_model_while_the_first_look_up_hangs() -> None:
    # The registry hangs from the first look-up: no model, and the metric holds (503), while
    # refreshes go on and say why.
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 600, step=STEP)
    source = FrameSource(frame)
    registry = HangingRegistry("prewarm-test")
    registry.lookups = 1  # every look-up hangs
    config = refresh_config(LEVELS, max_staleness=MAX_STALENESS, history_window=900.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    server, thread = start_server(app, lambda a: uvicorn_config(a, settings))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http:
            refresher = app.state.runtime.refresher
            wait_until(lambda: refresher.ticks >= 3, timeout=60)
            assert registry.hanging.is_set() and not registry.release.is_set()
            refused = http.get(METRIC)
            assert refused.status_code == 503
            assert "no model 'prewarm-test' loaded yet" in refused.json()["message"]
            ready = http.get("/readyz").json()
            assert ready["stale"] == {"chat": "no_model"}
            assert ready["model"]["problem"] == "no_model"  # though no look-up failed yet
        server.should_exit = True
        thread.join(timeout=20)
        assert not thread.is_alive(), "shutdown waited for the hanging registry look-up"
    finally:
        registry.release.set()
        server.should_exit = True
        thread.join(timeout=15)
