"""``model: {name: auto}`` in a real training run: the better model per workload, in MLflow.

Two workloads with a planted best model each: ``chat`` repeats one day exactly, with a
40-minute on/off cycle in it (same time yesterday is exact, the last value is often 30 off),
``code`` is a random walk (the last value is its best forecast, yesterday's a day behind).
Training selects per workload on the last day of each fold's training data, registers the
selection, tags each workload's model in the run, and the registered model says the same
after a round trip through the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.exceptions import ConfigError
from tests.integration.test_train_mlflow import config
from training.config import parse_config
from training.pipeline import MODEL_TAGS, Outcome, run_training, served_tags
from training.registry import load_champion

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

STEP = 300
AUTO = {"name": "auto", "params": {"candidates": ["last-value", "seasonal-naive-daily"]}}


def planted(days: int) -> pd.DataFrame:
    cells = days * 86400 // STEP
    times = pd.date_range("2026-02-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    cycle = np.arange(cells) % 8  # a 40-minute on/off cycle, 36 times a day: repeats daily
    chat = 60 + 40 * np.sin(2 * np.pi * np.arange(cells) * STEP / 86400) + 30 * (cycle < 4)
    code = 30 + np.cumsum(np.random.default_rng(7).normal(0, 0.5, cells))  # a random walk
    return pd.concat(
        [
            pd.DataFrame({"series": "chat", "timestamp": times, "value": chat}),
            pd.DataFrame({"series": "code", "timestamp": times, "value": np.abs(code)}),
        ],
        ignore_index=True,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root: Path = tmp_path_factory.mktemp("mlflow-auto")
    planted(days=6).to_csv(root / "demand.csv", index=False)
    return {"root": root, "uri": f"sqlite:///{root / 'mlflow.db'}"}


def test_the_gate_selects_the_planted_model_per_workload_and_tags_it(
    store: dict[str, Any],
) -> None:
    settings = parse_config(config(store, AUTO))
    result = run_training(settings, tracking_uri=store["uri"])
    assert result.outcome == Outcome.PROMOTED, result.message
    assert result.model is not None
    forecaster = result.model.forecaster
    assert forecaster.taus == {"chat": 0.9, "code": 0.9}  # each workload's own quantile

    tags = MlflowClient(store["uri"]).get_run(result.run_id).data.tags
    assert tags["prewarm.model.chat"] == "seasonal-naive-daily"
    assert tags["prewarm.model.code"] == "last-value"
    assert tags["prewarm.models"] == "seasonal-naive-daily 1, last-value 1"  # ties by name

    champion = load_champion("e2e-forecaster", store["uri"])
    assert champion.version == result.version
    assert champion.model.served_by("chat") == "seasonal-naive-daily"
    assert champion.model.served_by("code") == "last-value"
    # Serving keeps enough history for yesterday's value, though no boosting model is used.
    assert champion.model.history_cells_needed > 86400 // STEP


def test_a_single_model_run_tags_every_workload_with_it(store: dict[str, Any]) -> None:
    model = {"name": "ewma", "params": {"halflife": "10m"}}
    result = run_training(parse_config(config(store, model)), tracking_uri=store["uri"])
    tags = MlflowClient(store["uri"]).get_run(result.run_id).data.tags
    assert (tags["prewarm.model.chat"], tags["prewarm.model.code"]) == ("ewma", "ewma")
    assert tags["prewarm.models"] == "ewma 2"
    assert result.model is not None and result.model.served_by("chat") is None


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"candidates": ["last-value", "prophet"]}, r"model: params: `candidates`: 'prophet'"),
        ({"candidates": ["auto"]}, r"`candidates`: 'auto' is not a registered model to combine"),
        ({"taus": {"chat": 0.5}}, r"model.params: \['taus'\] are set by prewarm"),
    ],
)
def test_a_bad_selection_is_refused_when_the_config_is_read(
    store: dict[str, Any], params: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(config(store, {"name": "auto", "params": params}))


def test_a_fleet_gets_a_bounded_number_of_model_tags() -> None:
    from forecaster.models import make_model
    from forecaster.workload import WorkloadPolicy, WorkloadSpec
    from training.pyfunc import PrewarmModel

    spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=60.0)
    policies = {f"w{i:03d}": WorkloadPolicy(spec) for i in range(MODEL_TAGS + 50)}
    tags = served_tags(PrewarmModel(make_model("ewma"), policies), "ewma")
    assert tags["prewarm.models"] == f"ewma {MODEL_TAGS + 50}"
    per_workload = sorted(k for k in tags if k.startswith("prewarm.model."))
    assert per_workload == [f"prewarm.model.w{i:03d}" for i in range(MODEL_TAGS)]
