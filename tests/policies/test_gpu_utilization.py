"""The HPA on GPU utilization: a saturated fleet reports 100 %, so it grows by at most
1 / target per cold start, where the HPA on the demand asks for all it needs at once."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forecaster.backtest.simulator import simulate
from forecaster.exceptions import ConfigError
from forecaster.policies import Observation, make_policy
from forecaster.workload import ColdStart, WorkloadSpec

SPEC = WorkloadSpec(
    capacity_per_replica=10.0, cold_start=300, target_utilization=1.0, max_replicas=200
)
TARGET = 0.7


def step_up(spec: WorkloadSpec = SPEC) -> Observation:
    """Half an hour at 50 units/s, then an hour at 400: 1-minute data, scored from minute 30."""
    return Observation(np.array([50.0] * 60 + [400.0] * 60), 60.0, 30, spec)


def plan(name: str, obs: Observation) -> np.ndarray:
    return make_policy(name, target_utilization=TARGET, tolerance=0.0).plan(obs)


def test_an_overloaded_fleet_grows_by_one_over_the_target_per_cold_start() -> None:
    obs = step_up()
    gpu = plan("gpu-utilization", obs)
    ready = simulate(obs.sim_rate, gpu, SPEC, step_seconds=obs.sim_step).ready
    spike = 30 * 4  # the first 15 s step of 400 units/s
    steady = math.ceil(50 / (10 * TARGET))
    assert gpu[spike - 1] == steady
    # While saturated, every ask is at most ceil(ready / target) of the replicas ready when it
    # is made: replicas warming up report nothing, and the ready ones report at most 100 %.
    asks = [i for i in range(spike, len(gpu)) if gpu[i] > gpu[i - 1]]
    saturated = [i for i in asks if ready[i] * 10 < 400]
    assert len(saturated) >= 4
    for i in saturated:
        assert gpu[i] <= math.ceil(ready[i] / TARGET)
    # So the fleet grows by 1 / target per cold start (20 steps of 15 s): it needs
    # log(needed / steady) / log(1 / target) = 5.6 cold starts to get there.
    cold = 300 / obs.sim_step
    needed = math.ceil(400 / (10 * TARGET))
    assert gpu[spike : spike + int(cold)].max() == math.ceil(steady / TARGET) < needed
    assert np.flatnonzero(gpu >= needed)[0] - spike >= 5 * cold


def test_the_hpa_on_the_demand_asks_for_all_it_needs_within_a_minute() -> None:
    obs = step_up()
    demand = plan("reactive", obs)
    spike = 30 * 4
    assert demand[spike + 4] == math.ceil(400 / (10 * TARGET))
    gpu = plan("gpu-utilization", obs)
    reactive_run = simulate(obs.sim_rate, demand, SPEC, step_seconds=obs.sim_step)
    gpu_run = simulate(obs.sim_rate, gpu, SPEC, step_seconds=obs.sim_step)
    assert gpu_run.unserved.sum() > 2 * reactive_run.unserved.sum() > 0


def test_steady_demand_reads_the_same_on_both_metrics() -> None:
    obs = Observation(np.full(120, 73.0), 60.0, 30, SPEC)
    np.testing.assert_array_equal(plan("gpu-utilization", obs), plan("reactive", obs))
    assert plan("gpu-utilization", obs)[0] == math.ceil(73 / (10 * TARGET))


def test_a_fleet_scaled_to_zero_reports_no_utilization_and_stays_there() -> None:
    # No pod, no GPU metric: the HPA holds (it cannot scale from zero on a Pods metric),
    # where the HPA on the demand starts replicas.
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=60, min_replicas=0)
    obs = Observation(np.array([0.0] * 40 + [30.0] * 40), 60.0, 30, spec)
    assert plan("gpu-utilization", obs).max() == 0
    assert plan("reactive", obs).max() > 0


def test_a_drawn_cold_start_plans_the_same_twice() -> None:
    spec = WorkloadSpec(
        capacity_per_replica=10.0, cold_start=ColdStart.lognormal(240, 0.4), max_replicas=200
    )
    obs = step_up(spec)
    first, second = plan("gpu-utilization", obs), plan("gpu-utilization", obs)
    np.testing.assert_array_equal(first, second)
    assert first.max() > first[0]


def test_scrape_settings_no_prometheus_could_run_are_refused() -> None:
    policy = make_policy("gpu-utilization", scrape_interval=30.0, rate_window=30.0)
    with pytest.raises(ConfigError, match="at least two scrape intervals"):
        policy.plan(step_up())


def test_a_running_fleet_at_min_zero_keeps_serving_on_its_own_utilization() -> None:
    # KEDA's trigger on the GPU utilization keeps a fleet that runs up; only a fleet at zero
    # (previous test) cannot be woken by it.
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=60, min_replicas=0)
    obs = Observation(np.full(80, 30.0), 60.0, 30, spec)
    assert plan("gpu-utilization", obs).min() == math.ceil(30 / (10 * TARGET))
