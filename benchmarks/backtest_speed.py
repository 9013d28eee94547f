"""Backtest speed: 30 days of 1-minute data, six policies, full sweep, weekly retraining.

Prints wall time, peak memory and simulator steps per second. Target: under 2 minutes and
2 GiB on a 2-core machine. Run: ``.venv/bin/python benchmarks/backtest_speed.py``.
"""

from __future__ import annotations

import resource
import time

import numpy as np
import pandas as pd

from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.backtest.simulator import simulate
from forecaster.backtest.workload import WorkloadSpec
from forecaster.scenarios import steady_diurnal


def main() -> None:
    frame = steady_diurnal(days=30, step=60, seed=0)
    values = frame["value"].to_numpy(dtype=float)
    capacity = float(np.nanquantile(values, 0.99)) / 20
    spec = WorkloadSpec(capacity_per_replica=capacity, cold_start=300, max_replicas=60)
    settings = BacktestSettings(spec, train_window=14 * 86400, retrain_every=7 * 86400)
    began = time.perf_counter()
    result = backtest(values, pd.DatetimeIndex(frame["timestamp"]), 60, settings)
    wall = time.perf_counter() - began
    runs = sum(len(points) for points in result.frontier.values())

    obs = result.observation
    plan = np.full(obs.n_steps, 10)
    began = time.perf_counter()
    simulate(obs.sim_rate, plan, spec)
    per_second = obs.n_steps / (time.perf_counter() - began)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"wall time        {wall:.1f} s for {runs} simulated runs")
    print(f"peak memory      {peak_mib:.0f} MiB")
    print(f"simulator        {per_second:,.0f} steps/s ({obs.n_steps} steps per run)")


if __name__ == "__main__":
    main()
