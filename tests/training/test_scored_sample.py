"""A large fleet's folds score a sample of its workloads, spread over tiers and sizes, and its
model stores the history of a sample of them as its input example."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow.pyfunc
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from forecaster.workload import WorkloadPolicy, WorkloadSpec
from training.config import parse_config
from training.pipeline import run_training
from training.registry import load_model_version
from training.scoring import scored_sample
from training.tracking import example_workloads


def _fleet(levels: dict[str, tuple[int, float]]) -> tuple[dict[str, WorkloadPolicy], pd.DataFrame]:
    policies = {
        name: WorkloadPolicy(WorkloadSpec(capacity_per_replica=8.0, tier=tier))
        for name, (tier, _) in levels.items()
    }
    frame = pd.DataFrame(
        [(name, k, level) for name, (_, level) in levels.items() for k in range(3)],
        columns=["series", "timestamp", "value"],
    )
    return policies, frame


def test_the_sample_spans_every_tier_and_both_ends_of_demand() -> None:
    # Tier 1: five small-to-large workloads; tier 3: five more. Names hide the order.
    levels = {f"w{k}": (1 if k % 2 else 3, float(100 - 7 * k)) for k in range(10)}
    policies, frame = _fleet(levels)
    sample = scored_sample(policies, frame, 4)
    assert len(sample) == 4 == len(set(sample))
    tiers = [levels[n][0] for n in sample]
    assert tiers.count(1) == 2 and tiers.count(3) == 2
    for tier in (1, 3):
        sizes = sorted(level for t, level in levels.values() if t == tier)
        picked = sorted(levels[n][1] for n in sample if levels[n][0] == tier)
        assert picked == [sizes[0], sizes[-1]]  # each tier's smallest and largest
    assert scored_sample(policies, frame, 4) == sample  # no random draw


def test_the_example_spreads_over_the_names_and_holds_every_one_of_a_small_fleet() -> None:
    names = tuple(f"w{k:02d}" for k in range(10))
    assert example_workloads(names[::-1], 3) == ["w00", "w04", "w09"]
    assert example_workloads(names, 1) == ["w00"]
    assert example_workloads(names, 10) == example_workloads(names, 50) == sorted(names)


def test_a_fleet_within_the_limit_is_scored_whole() -> None:
    policies, frame = _fleet({"a": (2, 1.0), "b": (2, 2.0), "c": (1, 3.0)})
    assert scored_sample(policies, frame, 3) == ["a", "b", "c"]
    assert scored_sample(policies, frame, None) == ["a", "b", "c"]
    assert scored_sample(policies, frame, 2) == ["a", "c"]  # tier 1 first, then by size


@pytest.mark.integration
def test_training_gates_on_the_sample_and_stores_a_sampled_example(tmp_path: Path) -> None:
    names = ["chat", "image", "embed", "rerank"]
    frame = pd.concat(
        [
            gpu_inference_demand(days=3, step=300, seed=k, series=name, base_rate=10.0 * (k + 1),
                                 bursts_per_day=0)
            for k, name in enumerate(names)
        ],
        ignore_index=True,
    )  # fmt: skip
    data = tmp_path / "demand.csv"
    frame.to_csv(data, index=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = {
        "source": {"type": "file", "path": str(data)},
        "workloads": [{"name": name, "capacity": {"capacity_per_replica": 8, "cold_start": "10m",
                                                  "max_replicas": 100, "quantile": 0.9}}
                      for name in names],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "6h", "train_window": "2d", "policies": ["predictive"],
                       "scored_workloads": 2},
        "mlflow": {"tracking_uri": uri, "registered_model": "sampled", "plotted_workloads": 0,
                   "example_workloads": 2},
    }  # fmt: skip
    result = run_training(parse_config(settings))
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(str(result.run_id))
    gate = json.loads(Path(client.download_artifacts(run.info.run_id, "gate.json")).read_text())
    # Same tier, so the sample is the smallest and the largest workload by mean demand.
    assert gate["workloads"] == 4 and gate["scored"] == ["chat", "rerank"]
    scored = {key.split(".")[0] for key in run.data.metrics if key.endswith(".pinball")}
    assert scored == {"chat", "rerank"}
    assert result.model is not None and sorted(result.model.workloads) == sorted(names)
    # The stored example holds two workloads' recent history, the first and last by name;
    # loading validates the version on it, and the version plans for all four.
    assert result.version is not None
    stored = mlflow.pyfunc.load_model(f"models:/sampled/{result.version}").input_example
    assert isinstance(stored, pd.DataFrame)
    assert sorted(set(stored["series"])) == ["chat", "rerank"]
    kept = min(result.model.history_cells_needed, len(frame) // len(names))
    assert stored.groupby("series").size().eq(kept).all()
    loaded = load_model_version("sampled", result.version, uri)
    assert loaded.model.plan(frame)["series"].tolist() == sorted(names)
