"""Which workloads a run draws figures of: the ones an analyst looks at first, bounded."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from forecaster.scenarios import gpu_inference_demand
from training import pipeline
from training.config import TrainConfig, parse_config
from training.scoring import ModelScore, score_model
from training.tracking import plotted_workloads

# Demand levels far apart, so the cost at the SLO orders them without doubt.
LEVELS = {"chat": 20.0, "image": 200.0, "embed": 2.0}


def _config(plotted: int) -> TrainConfig:
    return parse_config(
        {
            "source": {"type": "file", "path": "unused.csv"},
            "workloads": [
                {
                    "name": name,
                    "capacity": {
                        "capacity_per_replica": 8,
                        "cold_start": "10m",
                        "max_replicas": 500,
                        "quantile": 0.9,
                    },
                }
                for name in LEVELS
            ],
            "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
            "evaluation": {"policies": ["predictive"]},
            "mlflow": {"plotted_workloads": plotted},
        }
    )


@pytest.fixture(scope="module")
def score() -> ModelScore:
    frame = pd.concat(
        [
            gpu_inference_demand(
                days=3, step=300, seed=k, series=name, base_rate=level, bursts_per_day=0
            )
            for k, (name, level) in enumerate(LEVELS.items())
        ],
        ignore_index=True,
    )
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
    start = frame["timestamp"].max() - pd.Timedelta(hours=6)
    config = _config(len(LEVELS))
    model = pipeline.build_model(config, 300).fit(frame[frame["timestamp"] < start])
    return score_model(model, frame, start, config.policies, policies=["predictive"])


def test_the_costliest_workloads_are_drawn_and_no_more_than_configured(score: ModelScore) -> None:
    costs = {name: score.workloads[name].costs["predictive"] for name in LEVELS}
    assert all(cost is not None for cost in costs.values()), costs
    assert plotted_workloads(_config(1), score) == ["image"]
    assert plotted_workloads(_config(2), score) == ["chat", "image"]
    assert plotted_workloads(_config(0), score) == []
    assert plotted_workloads(_config(10), score) == sorted(LEVELS)


def test_a_workload_missing_its_slo_is_drawn_before_the_costliest(score: ModelScore) -> None:
    embed = score.workloads["embed"]
    missed = dataclasses.replace(embed, costs={**embed.costs, "predictive": None})
    score = dataclasses.replace(score, workloads={**score.workloads, "embed": missed})
    assert plotted_workloads(_config(1), score) == ["embed"]
    assert plotted_workloads(_config(2), score) == ["embed", "image"]


def test_a_negative_bound_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="plotted_workloads"):
        _config(-1)
