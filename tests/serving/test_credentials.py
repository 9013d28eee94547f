"""A password in the MLflow store's URI never reaches a reply, ``/readyz`` or the log.

MLflow's errors quote the URI they were given; the HPA copies a refusal's message into the
events ``kubectl describe hpa`` shows. The registry here is the real MLflow client against a
port nothing listens on.
"""

from __future__ import annotations

import logging

import httpx
import pandas as pd
import pytest

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.engine.models import MlflowRegistry
from serving.settings import ServingSettings
from tests.serving.support import (
    FrameSource,
    free_port,
    history,
    refresh_config,
    running,
    wait_until,
)

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0}
SECRET = "s3cretPW"
METRIC = (
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
    "?labelSelector=workload%3Dchat"
)


def test_the_store_password_is_in_no_reply_and_no_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # one refused connection, not MLflow's default minutes of retries
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    registry = MlflowRegistry(f"http://admin:{SECRET}@127.0.0.1:{free_port()}/")
    source = FrameSource(history(LEVELS, pd.Timestamp.now(tz="UTC"), 600, step=2))
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(refresh_config(LEVELS), lambda: source, registry))
    with (
        caplog.at_level(logging.WARNING),
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):
        watcher, refresher = app.state.runtime.watcher, app.state.runtime.refresher
        wait_until(lambda: watcher.last_error is not None, timeout=30)
        # The registry is read in the watcher's own thread: the refresh under way when the
        # look-up failed may have read the watcher before, the one after it has not.
        ticks = refresher.ticks
        wait_until(lambda: refresher.ticks >= ticks + 2, timeout=30)
        refused = http.get(METRIC)
        replies = [
            refused,
            http.get("/v1/workloads/chat/forecast"),
            http.get("/v1/workloads/chat/explain"),
            http.get("/v1/workloads"),
            http.get("/readyz"),
        ]
    # the HPA holds, and the operator still reads where the lookup failed
    assert refused.status_code == 503
    assert "registry lookup" in refused.json()["message"]
    assert "***@127.0.0.1" in refused.json()["message"]
    for reply in replies:
        assert SECRET not in reply.text, reply.request.url
    assert "registry lookup" in caplog.text
    assert SECRET not in caplog.text
