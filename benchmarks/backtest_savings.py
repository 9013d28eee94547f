"""Cost at SLO per policy and hybrid's savings on the public traces and the scenarios.

Run: ``.venv/bin/python benchmarks/backtest_savings.py [--model lightgbm]``. Traces are
read from ``../shared/data`` (see its README for attribution). Cold start 5 minutes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.backtest.workload import WorkloadSpec
from forecaster.frame import infer_step, regularize
from forecaster.scenarios import SCENARIOS
from training.sources.file import read_series

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TRACES = {
    "nyc_taxi_passengers_30min.csv": None,
    "twitter_volume_amzn_5min.csv": None,
    "asg_cpu_utilization_5min.csv": None,
    "azure_vm_cpu_5min_relative.csv": "cpu_usage",
    "google_cluster_cpu_5min.csv": None,
}
POLICIES = ("static", "reactive", "seasonal-naive", "predictive", "hybrid", "oracle")


def load() -> dict[str, pd.DataFrame]:
    frames = {}
    for name, column in TRACES.items():
        frame = read_series(DATA / name, value_col=column)
        frames[name.removesuffix(".csv")] = regularize(frame, infer_step(frame))
    for name, make in SCENARIOS.items():
        frames[name] = regularize(make(28, 60, 0), 60)
    return frames


def run(frame: pd.DataFrame, model: str) -> dict[str, float | None]:
    values = frame["value"].to_numpy(dtype=float)
    step = infer_step(frame)
    capacity = float(np.nanquantile(values, 0.99)) / 20
    spec = WorkloadSpec(
        capacity_per_replica=capacity,
        cold_start=300,
        max_replicas=int(np.ceil(np.nanmax(values) / (capacity * 0.5))) + 1,
    )
    settings = BacktestSettings(
        spec, POLICIES, train_window=14 * 86400, retrain_every=7 * 86400, model=model
    )
    result = backtest(values, pd.DatetimeIndex(frame["timestamp"]), step, settings)
    return {**result.cost_at_slo, **result.savings_at_slo}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="lightgbm")
    args = parser.parse_args()
    rows = {name: run(frame, args.model) for name, frame in load().items()}
    table = pd.DataFrame(rows).T
    print(table.to_string(float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
