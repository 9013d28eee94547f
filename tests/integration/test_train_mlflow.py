"""``prewarm train`` end to end against a real MLflow SQLite store in a temp dir.

One store for the module (its first write runs the schema migrations, ~7 s). The runs are
ordered and each test relies on the previous ones, as the nightly job does:

1. a LightGBM forecaster with features unsuited to the data becomes ``champion``;
2. a LightGBM candidate trained on *shuffled* data is registered but not promoted;
3. a LightGBM candidate with suitable features beats the champion and is promoted;
4. rerunning 3 on the same data registers nothing and leaves the champion alone;
5. the loader returns the champion, and its plans equal the in-memory model's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from training.config import parse_config
from training.pipeline import Outcome, TrainResult, run_training
from training.registry import champion_version, load_champion, load_model_version
from training.settings import DEFAULT_TRACKING_URI, Settings, resolve_tracking_uri

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

NAME = "e2e-forecaster"
RESULTS: dict[str, TrainResult] = {}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("mlflow")
    # No bursts: a burst shorter than the cold start is missed by any forecast, and on one
    # evaluation day it would decide the gate by luck rather than by forecast quality.
    frames = [
        gpu_inference_demand(
            days=6, step=300, seed=11, series="chat", base_rate=40.0, bursts_per_day=0
        ),
        gpu_inference_demand(
            days=6, step=300, seed=12, series="code", base_rate=9.0, bursts_per_day=0
        ),
    ]
    pd.concat(frames).to_csv(root / "demand.csv", index=False)
    yield {"root": root, "uri": f"sqlite:///{root / 'mlflow.db'}"}


def config(store: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": {"type": "file", "path": str(store["root"] / "demand.csv")},
        "workloads": [
            {"name": "chat", "capacity": {"capacity_per_replica": 8, "cold_start": "10m",
                                          "max_replicas": 100, "quantile": 0.9}},
            {"name": "code", "capacity": {"capacity_per_replica": 2, "cold_start": "5m",
                                          "max_replicas": 100, "quantile": 0.9}},
        ],
        "model": model,
        "evaluation": {"window": "1d", "train_window": "5d", "policies": ["predictive"]},
        "gate": {"coverage_tolerance": 0.3},
        "mlflow": {"tracking_uri": store["uri"], "experiment": "e2e", "registered_model": NAME},
    }  # fmt: skip


# Features unsuited to six days of 5-minute data: the newest value it sees is half an hour
# old, its only seasonal lag is a week (unknown here) and it must rebuild the level from
# coarse leaves (no last-value baseline). The good configuration fits the data.
WEAK = {
    "name": "lightgbm",
    "params": {"n_estimators": 40, "learning_rate": 0.2, "baseline": "none"},
    "features": {"lags": [6], "windows": [], "scale_window": "7d", "seasonal_lags": ["7d"]},
}
GOOD = {
    "name": "lightgbm",
    "params": {"n_estimators": 40, "learning_rate": 0.2, "calibration_window": "1d"},
    "features": {"scale_window": "2h", "seasonal_lags": ["1d"]},
}


def shuffled(frame: pd.DataFrame) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    out = frame.copy()
    for _, index in out.groupby("series").groups.items():
        out.loc[index, "value"] = rng.permutation(out.loc[index, "value"].to_numpy())
    return out


def registered(uri: str) -> list[str]:
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    return sorted(str(v.version) for v in client.search_model_versions(f"name = '{NAME}'"))


def test_first_run_becomes_champion(store: dict[str, Any]) -> None:
    result = run_training(parse_config(config(store, WEAK)))
    RESULTS["first"] = result
    assert result.outcome is Outcome.PROMOTED, result.message
    assert result.version == "1"
    assert champion_version(NAME, store["uri"]) == "1"
    run = MlflowClient(tracking_uri=store["uri"]).get_run(str(result.run_id))
    assert run.data.tags["prewarm.data_fingerprint"] == result.data_fingerprint
    assert run.data.params["features.scale_window"] == "7d"
    metrics = run.data.metrics
    assert {
        "chat.pinball",
        "code.pinball",
        "chat.coverage.q0.9",
        "code.unserved.predictive",
    } <= set(metrics)
    assert any(key.startswith("chat.pinball.h") for key in metrics)  # per horizon
    artifacts = {
        a.path for a in MlflowClient(tracking_uri=store["uri"]).list_artifacts(run.info.run_id)
    }
    assert {"config", "data", "plots", "gate.json"} <= artifacts
    version = MlflowClient(tracking_uri=store["uri"]).get_model_version(NAME, "1")
    assert "Gate against no champion" in version.description
    assert (store["root"] / "mlartifacts").is_dir()  # artifacts beside the store, not in CWD


def test_candidate_trained_on_shuffled_data_is_registered_not_promoted(
    store: dict[str, Any],
) -> None:
    result = run_training(parse_config(config(store, GOOD)), fit_transform=shuffled)
    assert result.outcome is Outcome.NOT_PROMOTED, result.message
    assert result.version == "2"
    assert result.decision is not None and not result.decision.promote
    assert registered(store["uri"]) == ["1", "2"]
    assert champion_version(NAME, store["uri"]) == "1"


def test_better_candidate_is_promoted_through_the_cli(
    store: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config(store, GOOD)))
    outcome = CliRunner().invoke(cli, ["train", "--config", str(path), "--no-progress"])
    assert outcome.exit_code == 0, outcome.output
    assert "version 3: promoted" in outcome.output
    assert champion_version(NAME, store["uri"]) == "3"
    RESULTS["good"] = run_training(
        parse_config(config(store, GOOD)), tracking_uri=store["uri"]
    )  # the same data again: see the next test


def test_rerun_on_the_same_data_changes_nothing(store: dict[str, Any]) -> None:
    result = RESULTS["good"]
    assert result.outcome is Outcome.UNCHANGED, result.message
    assert result.version == "3"
    assert registered(store["uri"]) == ["1", "2", "3"]
    assert champion_version(NAME, store["uri"]) == "3"


def test_loader_returns_the_champion_and_matches_the_in_memory_model(
    store: dict[str, Any],
) -> None:
    in_memory = run_training(
        parse_config({**config(store, GOOD), "mlflow": {**config(store, GOOD)["mlflow"],
                                                        "registered_model": NAME + "-copy"}}),
    ).model  # fmt: skip
    assert in_memory is not None
    loaded = load_champion(NAME, store["uri"])
    assert (loaded.name, loaded.version) == (NAME, "3")
    assert loaded.workloads == ("chat", "code")
    assert loaded.step == 300
    frame = pd.read_csv(store["root"] / "demand.csv", parse_dates=["timestamp"])
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    recent = frame.groupby("series").tail(loaded.history_cells_needed)
    pd.testing.assert_frame_equal(loaded.plan(recent), in_memory.plan(recent))
    forecast = loaded.model.forecast(recent)
    pd.testing.assert_frame_equal(forecast, in_memory.forecast(recent))
    assert (forecast.filter(like="q") >= 0).all().all()


def test_loading_a_version_that_is_not_a_prewarm_model_fails_clearly(
    store: dict[str, Any],
) -> None:
    from training.exceptions import ModelLoadError

    with pytest.raises(ModelLoadError, match="version 99"):
        load_model_version(NAME, "99", store["uri"])
    assert champion_version("no-such-model", store["uri"]) is None


def test_tracking_uri_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREWARM_MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(None, None) == DEFAULT_TRACKING_URI == "sqlite:///mlflow.db"
    assert resolve_tracking_uri(None, "sqlite:///c.db") == "sqlite:///c.db"
    monkeypatch.setenv("PREWARM_MLFLOW_TRACKING_URI", "sqlite:///env.db")
    assert Settings().mlflow_tracking_uri == "sqlite:///env.db"
    assert resolve_tracking_uri(None, "sqlite:///c.db") == "sqlite:///env.db"
    assert resolve_tracking_uri("sqlite:///flag.db", "sqlite:///c.db") == "sqlite:///flag.db"
