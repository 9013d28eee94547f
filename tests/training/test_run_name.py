"""A training run is named after the time it ran, read from the clock it is given."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from training.config import parse_config
from training.pipeline import run_training

pytestmark = pytest.mark.integration


def test_run_is_named_after_the_clock_not_the_data(tmp_path: Path) -> None:
    data = tmp_path / "demand.csv"
    frame = gpu_inference_demand(days=3, step=300, seed=4, series="chat", bursts_per_day=0)
    frame.to_csv(data, index=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    settings = {
        "source": {"type": "file", "path": str(data)},
        "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 8, "cold_start": "10m",
                                                    "max_replicas": 100, "quantile": 0.9}}],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "6h", "train_window": "2d", "policies": ["predictive"]},
        "mlflow": {"tracking_uri": uri, "registered_model": "named"},
    }  # fmt: skip
    ran_at = pd.Timestamp("2031-07-08 09:10:11", tz="UTC")
    result = run_training(parse_config(settings), clock=lambda: ran_at)
    run = MlflowClient(tracking_uri=uri).get_run(str(result.run_id))
    assert run.info.run_name == "train 2031-07-08 09:10 UTC"
    assert not run.data.params["data.end"].startswith("2031")  # the data ends elsewhere
