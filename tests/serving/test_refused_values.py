"""Values the data contract refuses (a broken exporter's negative demand, an infinite or
absurd value) are kept as missing: the metric holds on them, never scales on them, and the
workload is served again as soon as good values arrive, not a history window later."""

from __future__ import annotations

import logging

import httpx
import numpy as np
import pandas as pd
import pytest

from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.engine.window import RollingWindow, WorkloadQuery
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

LEVELS = {"chat": 40.0}
STEP = 2
MAX_STALENESS = 6.0
METRIC = (
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/prewarm_desired_replicas"
    "?labelSelector=workload%3Dchat"
)
COUNTED = 'prewarm_refused_values_total{workload="chat"} '


def test_refused_values_are_missing_and_counted_once() -> None:
    end = pd.Timestamp("2025-05-01T06:00:00Z")
    frame = history(LEVELS, end, 30, step=STEP)
    values = frame["value"].to_numpy(copy=True)
    values[-4:] = [-1.0, np.inf, 2e12, np.nan]  # refused, refused, refused, missing
    source = FrameSource(frame.assign(value=values))
    window = RollingWindow(
        [WorkloadQuery("chat", "chat")], lambda: source, window_seconds=60 * STEP, step=STEP
    )
    try:
        outcome = window.update(end)
        assert outcome.refused == {"chat": 3}
        good = end - pd.Timedelta(seconds=4 * STEP)
        assert window.last_data("chat") == good
        for k in range(1, 4):
            assert window.value_at("chat", good + pd.Timedelta(seconds=k * STEP)) is None
        # The cells after the last good value are asked again; their values are not counted
        # again.
        again = window.update(end)
        assert len(source.calls) == 2 and again.refused == {}
        kept = window.frame()["value"]
        assert not ((kept < 0) | (kept.abs() >= 1e12)).any()
    finally:
        window.close()


@pytest.mark.integration
def test_a_few_negative_points_hold_the_metric_and_good_ones_serve_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 600, step=STEP)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS, max_staleness=MAX_STALENESS, history_window=900.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    app = create_app(settings, ServingComponents(config, lambda: source, registry))
    with (
        caplog.at_level(logging.INFO, logger="serving.engine.window"),
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):

        def fresh() -> bool:
            source.extend(pd.Timestamp.now(tz="UTC"), LEVELS, step=STEP)
            return http.get("/readyz").json()["fresh"] == ["chat"]

        wait_until(fresh, timeout=60, every=0.2)
        (item,) = http.get(METRIC).json()["items"]
        assert COUNTED + "0.0" in http.get("/metrics").text

        # A broken exporter: three negative points, received as the clock reaches them.
        first_bad = source.frame["timestamp"].max() + pd.Timedelta(seconds=STEP)
        source.extend(first_bad + pd.Timedelta(seconds=2 * STEP), {"chat": -5.0}, step=STEP)
        last_bad = source.frame["timestamp"].max()
        answers = []

        def all_three_counted() -> bool:
            answers.append(http.get(METRIC))
            return COUNTED + "3.0" in http.get("/metrics").text

        wait_until(all_three_counted, timeout=60, every=0.2)
        # Meanwhile the metric held: the last good value or the hold error, never a number
        # computed from negative demand.
        for answer in answers:
            assert answer.status_code in (200, 503), answer.text
            if answer.status_code == 200:
                assert answer.json()["items"][0]["value"] == item["value"]

        def served_from_good_points() -> bool:
            source.extend(pd.Timestamp.now(tz="UTC"), LEVELS, step=STEP)
            reply = http.get("/v1/workloads/chat/forecast")
            return reply.status_code == 200 and pd.Timestamp(reply.json()["origin"]) > last_bad

        wait_until(served_from_good_points, timeout=60, every=0.2)
        assert http.get(METRIC).status_code == 200
        assert COUNTED + "3.0" in http.get("/metrics").text  # counted once, though re-read

    records = [r for r in caplog.records if r.name == "serving.engine.window"]
    (warning,) = [r for r in records if r.levelno == logging.WARNING]  # once per episode
    fields = {k: getattr(warning, k) for k in ("workload", "time", "value", "reason")}
    assert fields == {
        "workload": "chat",
        "time": first_bad.isoformat(),
        "value": -5.0,
        "reason": "negative demand",
    }
    (ended,) = [r for r in records if r.getMessage() == "good values again after refused ones"]
    assert getattr(ended, "refused_values") == 3  # noqa: B009
