"""The CPUs a training job may use: its affinity, bounded by its container's CPU limit (a
cgroup quota); its model's fit runs on them unless the config says otherwise."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from forecaster.frame import regularize, validate_frame
from forecaster.models.quantile_gbm import QuantileGradientBoosting
from forecaster.scenarios import gpu_inference_demand
from training import compute, pipeline
from training.compute import usable_cpus
from training.config import parse_config

AFFINITY = len(os.sched_getaffinity(0))


def cgroup(tmp_path: Path, v2: str | None = None, v1: tuple[str, str] | None = None) -> Any:
    v2_file = tmp_path / "cpu.max"
    quota, period = tmp_path / "cfs_quota_us", tmp_path / "cfs_period_us"
    if v2 is not None:
        v2_file.write_text(v2)
    if v1 is not None:
        quota.write_text(v1[0])
        period.write_text(v1[1])
    return usable_cpus(v2_file, (quota, period))


@pytest.mark.parametrize(
    ("v2", "v1", "expected"),
    [
        ("100000 100000\n", None, 1),  # limits: {cpu: "1"}
        ("150000 100000\n", None, min(AFFINITY, 2)),  # 1.5 CPUs' time: two threads use it
        ("50000 100000\n", None, 1),  # half a CPU: still one
        ("max 100000\n", None, AFFINITY),  # no limit
        (None, ("200000", "100000"), min(AFFINITY, 2)),  # cgroup v1
        (None, ("-1", "100000"), AFFINITY),
        (None, None, AFFINITY),  # no cgroup files
        ("garbage\n", None, AFFINITY),  # not as documented: no quota known
    ],
)
def test_the_cpus_are_the_affinity_bounded_by_the_quota(tmp_path, v2, v1, expected):
    assert cgroup(tmp_path, v2, v1) == expected


def small_config(params: dict[str, Any]) -> Any:
    return parse_config(
        {
            "source": {"type": "file", "path": "demand.csv"},
            "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 8}}],
            "model": {"name": "lightgbm", "params": {"n_estimators": 10, **params}},
        }
    )


@pytest.mark.parametrize(("params", "fit_jobs", "kept"), [({}, 3, 1), ({"n_jobs": 2}, 2, 2)])
def test_the_fit_uses_the_jobs_cpus_unless_configured(monkeypatch, params, fit_jobs, kept):
    monkeypatch.setattr(pipeline, "usable_cpus", lambda: 3)
    seen: list[int] = []
    fit = QuantileGradientBoosting.fit

    def noting(self: QuantileGradientBoosting, *args: Any, **kwargs: Any) -> Any:
        seen.append(self.n_jobs)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(QuantileGradientBoosting, "fit", noting)
    demand = gpu_inference_demand(days=4, step=900, seed=2, base_rate=30.0, series="chat")
    model = pipeline._fit(
        small_config(params), {}, regularize(validate_frame(demand), 900), 900, None
    )
    assert seen == [fit_jobs]
    assert model.get_params()["n_jobs"] == kept  # the registered model forecasts as configured


def logged_square(value: int) -> int:
    """A call that logs, as a backtest's model fit may (importable by the worker processes)."""
    logging.getLogger("forecaster.models").warning("squaring %d", value)
    return value * value


def test_many_calls_run_on_local_processes_with_the_same_results(monkeypatch, caplog):
    monkeypatch.setattr(compute, "usable_cpus", lambda: 2)
    calls = {f"w{i}": (i,) for i in range(compute.LOCAL_POOL_MIN_CALLS)}
    with caplog.at_level(logging.WARNING, logger="forecaster"):
        results = dict(compute.map_calls(logged_square, calls, None))
    assert results == {name: args[0] ** 2 for name, args in calls.items()}
    # each worker's record handled here, as this process's own
    found = sorted(r.getMessage() for r in caplog.records if r.name == "forecaster.models")
    assert found == sorted(f"squaring {i}" for i in range(compute.LOCAL_POOL_MIN_CALLS))
    workers = {r.processName for r in caplog.records if r.name == "forecaster.models"}
    assert "MainProcess" not in workers


def test_a_caller_whose_calls_are_long_starts_the_processes_from_fewer_calls(monkeypatch, caplog):
    # the backtests of `backtest --config` and `train --tune`: two repay the processes' start
    monkeypatch.setattr(compute, "usable_cpus", lambda: 2)
    calls = {"w0": (3,), "w1": (4,)}
    with caplog.at_level(logging.WARNING, logger="forecaster"):
        results = dict(compute.map_calls(logged_square, calls, None, min_local_calls=2))
    assert results == {"w0": 9, "w1": 16}
    workers = {r.processName for r in caplog.records if r.name == "forecaster.models"}
    assert workers and "MainProcess" not in workers
    # by default two calls run here
    assert {pid for _, pid in compute.map_calls(lambda v: os.getpid(), calls, None)} == {
        os.getpid()
    }


def test_few_calls_or_one_cpu_run_here_in_order(monkeypatch):
    monkeypatch.setattr(compute, "usable_cpus", lambda: 1)
    calls = {f"w{i}": (i,) for i in range(compute.LOCAL_POOL_MIN_CALLS)}
    assert list(compute.map_calls(lambda v: os.getpid(), calls, None)) == [
        (name, os.getpid()) for name in calls
    ]


def test_a_local_worker_that_dies_is_a_compute_error(monkeypatch):
    monkeypatch.setattr(compute, "usable_cpus", lambda: 2)
    calls = {f"w{i}": (1,) for i in range(compute.LOCAL_POOL_MIN_CALLS)}
    with pytest.raises(compute.ComputeError, match="a local worker process died while computing"):
        list(compute.map_calls(os._exit, calls, None))
