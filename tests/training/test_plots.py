"""Drawing a training run's figures leaves the caller's matplotlib backend alone.

A notebook that trains and then plots must still draw with its own (inline) backend, so the
figures are run in a fresh interpreter that chose a backend first, as a notebook does.
"""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import io, json, sys
import matplotlib

matplotlib.use("pdf")  # the caller's choice; a notebook's would be its inline backend

import mlflow
import pandas as pd
from forecaster.scenarios import gpu_inference_demand
from training import pipeline, tracking
from training.config import parse_config
from training.scoring import score_model

config = parse_config({
    "source": {"type": "file", "path": "unused.csv"},
    "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 8, "cold_start": "10m",
                                                "max_replicas": 100, "quantile": 0.9}}],
    "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
    "evaluation": {"policies": ["predictive"]},
})
frame = gpu_inference_demand(days=3, step=300, seed=1, series="chat", bursts_per_day=0)
frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
start = frame["timestamp"].max() - pd.Timedelta(hours=6)
model = pipeline.build_model(config, 300).fit(frame[frame["timestamp"] < start])
score = score_model(model, frame, start, config.policies, policies=["predictive"])
drawn = []

def log_figure(figure, path):
    figure.savefig(io.BytesIO(), format="png")
    drawn.append(path)

mlflow.log_figure = log_figure  # the figures as training draws them, without a store
tracking._log_figures(config, score)
print(json.dumps({
    "pyplot": "matplotlib.pyplot" in sys.modules,
    "backend": matplotlib.get_backend(),
    "drawn": drawn,
}))
"""


def test_training_figures_pick_no_backend_and_leave_pyplot_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["drawn"] == [
        "plots/chat/forecast.png",
        "plots/chat/frontier.png",
        "plots/chat/backtest_day.png",
    ]
    assert not result["pyplot"]
    assert result["backend"] == "pdf"
