"""Serving's logs under refused load: bounded volume, and never a credential.

A stale workload is refused on every request; the refusals are counted one by one on
``/metrics`` while the log gets one line per workload and reason per interval.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.engine.observability import Throttle
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
from training.logs import JsonFormatter

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0}
GROUP = "/apis/external.metrics.k8s.io/v1beta1"


class _Lines(logging.Handler):
    """Every record of the ``serving`` loggers, as the JSON line the service would write."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def lines() -> Iterator[_Lines]:
    handler = _Lines()
    root = logging.getLogger("serving")
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)


def test_throttle_lets_one_event_per_key_and_interval_through() -> None:
    now = [100.0]
    throttle = Throttle(60.0, clock=lambda: now[0])
    assert throttle.admit(("chat", "stale")) == 0
    assert [throttle.admit(("chat", "stale")) for _ in range(999)] == [None] * 999
    # Another key has its own interval.
    assert throttle.admit(("chat", "shadow")) == 0
    now[0] = 159.9
    assert throttle.admit(("chat", "stale")) is None
    now[0] = 160.0
    # The line after the interval says how many it stood for.
    assert throttle.admit(("chat", "stale")) == 1000
    assert throttle.admit(("chat", "stale")) is None


def test_throttle_remembers_a_bounded_number_of_keys() -> None:
    # Keys may be error texts, which vary: the table never outgrows max_keys.
    now = [0.0]
    throttle = Throttle(60.0, clock=lambda: now[0])
    for k in range(3 * Throttle.max_keys):
        now[0] = k * 0.01  # all within one interval: the oldest half goes
        assert throttle.admit(f"error {k}") == 0
        assert len(throttle._keys) <= Throttle.max_keys
    # A key still in its interval after the last pruning is still held back.
    assert throttle.admit(f"error {3 * Throttle.max_keys - 1}") is None


@pytest.fixture
def stale(lines: _Lines) -> Iterator[tuple[Any, int]]:
    """A server whose one workload's data ended two hours ago (before its history window):
    every request is refused."""
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC") - pd.Timedelta(hours=2), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=60.0)
    settings = ServingSettings(port=free_port(), grpc_port=0)
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.model_version is not None)
        # Time stands still for the throttle: the count below cannot depend on speed.
        runtime.metrics.refusal_log.clock = lambda: 0.0
        yield app, settings.port


def test_a_thousand_refusals_write_fewer_than_twenty_lines(
    stale: tuple[Any, int], lines: _Lines
) -> None:
    app, port = stale
    before = len(lines.lines)
    stubs = load_externalscaler()
    ref = stubs.pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "chat"})
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        for i in range(400):
            metric = ("prewarm_desired_replicas", "prewarm_forecast_demand")[i % 2]
            path = f"{GROUP}/namespaces/default/{metric}?labelSelector=workload%3Dchat"
            assert http.get(path).status_code == 503
        for _ in range(400):
            assert http.get("/v1/workloads/chat/forecast").status_code == 503
        with grpc.insecure_channel(f"127.0.0.1:{app.state.runtime.grpc_port}") as channel:
            stub = stubs.pb2_grpc.ExternalScalerStub(channel)
            for _ in range(200):
                with pytest.raises(grpc.RpcError) as caught:
                    stub.IsActive(ref, timeout=5)
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        exposition = http.get("/metrics").text
    written = lines.lines[before:]
    assert len(written) < 20, "\n".join(written[:25])
    refusals = [line for line in written if "forecast unavailable" in line]
    assert len(refusals) == 1, refusals
    # The counters carry the detail the log leaves out.
    counted = {
        (s.labels["api"], s.labels["reason"]): s.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "prewarm_unavailable_responses"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert counted == {
        ("external_metrics", "no_forecast"): 400.0,
        ("keda", "no_forecast"): 400.0,
        ("grpc", "no_forecast"): 200.0,
    }, counted


SECRETS = ("s3cret-pw", "tok-123", "hdr-456")
OUTAGE = (
    "cannot reach http://bob:s3cret-pw@prom:9090/api/v1/query_range?query=up&token=tok-123 "
    "with headers {'Authorization': 'Bearer hdr-456'}"
)


def test_source_errors_leave_no_credential_in_logs_or_answers(lines: _Lines) -> None:
    """The source fails quoting its URL with user:password@, a token parameter and its
    Authorization header: serving's logs and its 503 bodies carry none of them."""
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=60.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    source = FrameSource(frame, fail=OUTAGE)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.store.current.states["chat"].problem is not None)
        with httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http:
            answers = [
                http.get(
                    f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3Dchat"
                ),
                http.get("/v1/workloads/chat/forecast"),
            ]
    assert [a.status_code for a in answers] == [503, 503]
    assert all("source error" in a.json()["message"] for a in answers)
    fetch_failures = [line for line in lines.lines if "history fetch failed" in line]
    assert fetch_failures and any("forecast unavailable" in line for line in lines.lines)
    for text in (*lines.lines, *(a.text for a in answers)):
        for secret in SECRETS:
            assert secret not in text, text


@pytest.mark.parametrize("token", [None, "s3cret-token"], ids=["open", "token"])
def test_a_server_without_a_token_says_what_is_open_at_start(
    lines: _Lines, token: str | None
) -> None:
    """Without a token, anyone reaching the ports reads every forecast and, with no client CA
    either, can hold the gRPC scaler's stream slots: one WARNING at start says so, and how to
    close it."""
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    settings = ServingSettings(port=free_port(), grpc_port=0, token=token)
    components = ServingComponents(refresh_config(LEVELS), lambda: FrameSource(frame), registry)
    app = create_app(settings, components)
    with running(app, lambda a: uvicorn_config(a, settings)):
        wait_until(lambda: app.state.runtime.grpc_port is not None)
    warned = [line for line in lines.lines if "no token:" in line]
    if token is None:
        (line,) = warned
        assert '"level": "warning"' in line and "--token-file" in line
        assert "stream slots" in line  # no client CA either: gRPC is open too
    else:
        assert warned == []
        assert all(token not in line for line in lines.lines)


# A fresh interpreter: MLflow imported before or after the service's logging is set up.
MLFLOW_RECORD = """
import json, logging, sys
from serving.engine.observability import configure_logging
if sys.argv[1] == "before":
    import mlflow
configure_logging("INFO")
import mlflow
logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
logging.getLogger("uvicorn.error").info(
    "Started server process", extra={"color_message": "Started server process [\x1b[36m1\x1b[0m]"}
)
logging.getLogger("mlflow.store").warning("cannot reach the registry")
"""


@pytest.mark.parametrize("imported", ["before", "after"])
def test_mlflow_records_are_json_lines_too(imported: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MLFLOW_RECORD, imported],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # JSON lines only, in the collector's format, not MLflow's own; the model store's
    # database set-up quiet at INFO; uvicorn's message once, without its colours.
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(r["logger"], r["message"]) for r in records] == [
        ("uvicorn.error", "Started server process"),
        ("mlflow.store", "cannot reach the registry"),
    ]
    assert "color_message" not in records[0]
