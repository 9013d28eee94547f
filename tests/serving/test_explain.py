"""``GET /v1/workloads/NAME/explain`` over real HTTP, and every refusal it can name."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest

from forecaster.models.combination import Combination
from serving.api.app import create_app, uvicorn_config
from serving.api.explain import explanation
from serving.api.runtime import ServingComponents
from serving.engine.snapshot import Snapshot, WorkloadForecast, WorkloadState
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

# "idle" needs no replica and is lifted to min_replicas; "flood" needs more than max_replicas.
LEVELS = {"chat": 40.0, "flood": 2000.0, "idle": 0.0}
TOKEN = "explain-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Any]]:
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    workload_specs = specs(LEVELS, min_replicas=2)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, workload_specs))
    config = refresh_config(LEVELS, workload_specs=workload_specs, max_staleness=3600.0)
    token_file: Path = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN)
    settings = ServingSettings(port=free_port(), grpc_port=None, token_file=token_file)
    with _serving(settings, config, frame, registry) as http:
        yield http, frame


@contextmanager
def _serving(
    settings: ServingSettings, config: Any, frame: pd.DataFrame, registry: DictRegistry
) -> Iterator[httpx.Client]:
    """The app over real HTTP, once every workload has a forecast."""
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=5) as http,
    ):
        store = app.state.runtime.store
        wait_until(lambda: all(s.forecast for s in store.current.states.values()))
        yield http


@pytest.mark.integration
def test_explain_names_the_model_a_selection_serves_each_workload_with() -> None:
    levels = {"chat": 40.0, "batch": 5.0}
    frame = history(levels, pd.Timestamp.now(tz="UTC"), 400)
    # batch walks at random: its last value is the better forecast; chat repeats a 20-cell
    # cycle exactly, which the selection's other candidate reads one cycle back.
    walk = np.cumsum(np.random.default_rng(5).normal(0, 0.5, 400))
    frame.loc[frame["series"] == "batch", "value"] = np.abs(5.0 + walk)
    cycle = np.tile(np.r_[np.zeros(10), np.full(10, 30.0)], 20)
    frame.loc[frame["series"] == "chat", "value"] = 40.0 + cycle
    workload_specs = specs(levels)

    def select(horizons: list[int], quantiles: list[float]) -> Combination:
        return Combination(
            horizons=horizons,
            quantiles=quantiles,
            candidates=("last-value", "seasonal-naive-daily"),
            candidate_params={"seasonal-naive-daily": {"season": "200s", "scale_window": "5m"}},
            method="select",
        )

    planner = fit_planner(frame, workload_specs, select)
    registry = DictRegistry("prewarm-test")
    registry.add(planner)
    config = refresh_config(levels, workload_specs=workload_specs, max_staleness=3600.0)
    settings = ServingSettings(port=free_port(), grpc_port=None)
    with _serving(settings, config, frame, registry) as http:
        served = {n: http.get(f"/v1/workloads/{n}/explain").json()["servedBy"] for n in levels}
    assert served == {"chat": "seasonal-naive-daily", "batch": "last-value"}
    assert served == {n: planner.served_by(n) for n in levels}


@pytest.mark.integration
@pytest.mark.parametrize(("name", "clamp"), [("chat", None), ("flood", "max"), ("idle", "min")])
def test_explain_is_consistent_with_the_served_answer(
    served: tuple[httpx.Client, Any], name: str, clamp: str | None
) -> None:
    http, frame = served
    body = http.get(f"/v1/workloads/{name}/explain", headers=AUTH).json()
    answer = http.get(f"/v1/workloads/{name}/forecast", headers=AUTH).json()
    forecast, capacity, replicas = body["forecast"], body["capacity"], body["replicas"]

    assert body["served"] is True and body["refused"] is None and body["mode"] == "serving"
    assert body["modelVersion"] == answer["modelVersion"] == "1"
    assert body["servedBy"] is None  # one model, no per-workload choice to name
    # The planned maximum is the plan quantile's entry of the band, and it is what is served.
    assert forecast["forecastDemand"] == answer["forecastDemand"]
    assert forecast["quantiles"][f"{forecast['quantile']:g}"] == forecast["forecastDemand"]
    assert forecast["quantiles"]["0.5"] <= forecast["quantiles"]["0.9"]
    lead = forecast["leadTimeSeconds"]
    assert lead == answer["leadTimeSeconds"]
    assert lead <= forecast["peakHorizonSeconds"] < lead + 10 + 1e-9
    assert capacity == {"capacityPerReplica": 10.0, "utilization": 0.8, "demandTarget": 8.0}
    needed = math.ceil(forecast["forecastDemand"] / (10.0 * 0.8) - 1e-9)
    assert replicas["needed"] == needed
    assert replicas["desiredReplicas"] == min(max(needed, 2), 50) == answer["desiredReplicas"]
    assert (replicas["minReplicas"], replicas["maxReplicas"], replicas["clamp"]) == (2, 50, clamp)
    # Demand now: the last point received, with its age.
    last = frame[frame["series"] == name].iloc[-1]
    assert body["demand"]["now"] == pytest.approx(float(last["value"]))
    assert body["demand"]["ageSeconds"] >= 0


@pytest.mark.integration
def test_explain_needs_the_token_and_a_known_workload(served: tuple[httpx.Client, Any]) -> None:
    http, _ = served
    assert http.get("/v1/workloads/chat/explain").status_code == 401
    wrong = http.get("/v1/workloads/chat/explain", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "nope" not in wrong.text
    unknown = http.get("/v1/workloads/nope/explain", headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["kind"] == "Status" and "'nope'" in unknown.json()["message"]


NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _forecast(origin: datetime) -> WorkloadForecast:
    return WorkloadForecast(
        workload="chat",
        desired_replicas=3,
        forecast_demand=20.0,
        quantile=0.9,
        lead_time_seconds=30.0,
        origin=origin,
        generated_at=origin,
        model_version="7",
        capacity_per_replica=10.0,
        target_utilization=0.8,
        min_replicas=1,
        max_replicas=5,
        quantiles={0.5: 12.0, 0.9: 20.0},
        peak_horizon_seconds=40.0,
    )


@pytest.mark.parametrize(
    ("state", "model_version", "shadow", "cause", "says"),
    [
        (WorkloadState("chat"), None, False, "no_model", "no forecast yet"),
        (
            WorkloadState("chat", _forecast(NOW - timedelta(seconds=600)), NOW),
            "7",
            False,
            "stale",
            "max_staleness 120 s",
        ),
        (
            WorkloadState("chat", drift="workload chat: cold_start 30 -> 60 since version 7"),
            "7",
            False,
            "drift",
            "cold_start 30 -> 60",
        ),
        (
            WorkloadState("chat", _forecast(NOW - timedelta(seconds=5)), NOW, 18.0),
            "7",
            True,
            "shadow",
            "shadow mode",
        ),
    ],
    ids=["no-model", "stale", "drift", "shadow"],
)
def test_explain_names_why_a_value_is_refused(
    state: WorkloadState, model_version: str | None, shadow: bool, cause: str, says: str
) -> None:
    snapshot = Snapshot(
        {"chat": state}, max_staleness=120.0, model_version=model_version, shadow=shadow
    )
    body = explanation(snapshot, "chat", NOW)
    assert body["served"] is False
    assert body["refused"]["cause"] == cause and says in body["refused"]["reason"]
    if state.forecast is not None:
        assert body["replicas"]["needed"] == 3 and body["replicas"]["clamp"] is None
        assert body["forecast"]["quantiles"] == {"0.5": 12.0, "0.9": 20.0}


def test_explain_of_a_served_value_without_refusal() -> None:
    state = WorkloadState("chat", _forecast(NOW - timedelta(seconds=5)), NOW, 18.0)
    body = explanation(
        Snapshot({"chat": state}, max_staleness=120.0, model_version="7"), "chat", NOW
    )
    assert body["served"] is True and body["refused"] is None
    assert body["demand"] == {"now": 18.0, "at": "2026-05-01T12:00:00Z", "ageSeconds": 0.0}
    assert body["forecast"]["dataAgeSeconds"] == 5.0
    assert body["forecast"]["peakHorizonSeconds"] == 40.0
