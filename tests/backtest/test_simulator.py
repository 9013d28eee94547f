"""Simulator mechanics and invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.backtest.metrics import compute_metrics
from forecaster.backtest.simulator import simulate
from forecaster.exceptions import DataValidationError
from forecaster.policies import Observation, make_policy
from forecaster.resampling import resample_demand
from forecaster.workload import ColdStart, WorkloadSpec

SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=30, slo_latency_seconds=30)


@pytest.mark.parametrize(
    ("data_step", "sim_step", "expected"),
    [
        pytest.param(60, 15, [1, 1, 1, 1, 3, 3, 3, 3], id="finer"),
        pytest.param(60, 120, [2], id="coarser-averages"),
        # [45, 90) holds 15 s of 1 and 30 s of 3; the last step has only 30 s of data
        pytest.param(60, 45, [1, (15 + 90) / 45, 90 / 45], id="straddling-weights-by-time"),
    ],
)
def test_resample_holds_demand_and_conserves_work(
    data_step: float, sim_step: float, expected: list[float]
) -> None:
    demand = np.array([1.0, 3.0])
    rate = resample_demand(demand, data_step, sim_step)
    assert rate.tolist() == pytest.approx(expected)
    assert rate.sum() * sim_step == pytest.approx(demand.sum() * data_step)


def test_resample_rejects_missing_values() -> None:
    with pytest.raises(DataValidationError, match="finite"):
        resample_demand(np.array([1.0, np.nan]), 60, 15)


def test_replicas_become_ready_after_the_cold_start() -> None:
    run = simulate(np.zeros(6), np.array([1, 3, 3, 3, 3, 3]), SPEC)
    assert run.ready.tolist() == [1, 1, 1, 3, 3, 3]
    assert run.asked.tolist() == [1, 3, 3, 3, 3, 3]
    assert run.launched.tolist() == [0, 2, 0, 0, 0, 0]


def test_scale_down_removes_pending_replicas_first() -> None:
    run = simulate(np.zeros(5), np.array([2, 4, 3, 3, 3]), SPEC)
    # one of the two pending replicas is cancelled; the two ready ones keep serving
    assert run.ready.tolist() == [2, 2, 2, 3, 3]
    assert run.asked.tolist() == [2, 4, 3, 3, 3]


def test_backlog_is_served_within_the_latency_then_dropped() -> None:
    # capacity 150 per step; 450 arrives in step 0 (over [0, 15) s), nothing after: served by
    # 45 s, so the last of it, arrived at 15 s, waited 30 s and is just in time
    run = simulate(np.array([30.0, 0.0, 0.0]), np.array([1, 1, 1]), SPEC)
    assert run.served.tolist() == pytest.approx([150.0, 150.0, 150.0])
    assert run.unserved.sum() == 0.0
    # 600 arriving: by 30 s 300 is served, up to 7.5 s of arrivals; step 2 serves 10 per s
    # while the deadline sweeps arrivals at 40 per s, and catches the service at 40 s (10 s of
    # arrivals); the last 5 s of arrivals, 200, meet 50 of service: 150 lost, in step 2
    run = simulate(np.array([40.0, 0.0, 0.0]), np.array([1, 1, 1]), SPEC)
    assert run.served.tolist() == pytest.approx([150.0, 150.0, 150.0])
    assert run.unserved.tolist() == pytest.approx([0.0, 0.0, 150.0])
    assert run.backlog.tolist() == pytest.approx([450.0, 300.0, 0.0])


def test_deadline_falls_inside_a_step() -> None:
    # 60 s steps, 15 s SLO, arrivals 20 per s for 60 s, service 10 per s. At time t service
    # has reached the arrivals of t / 2, which is at the deadline t - 15 at t = 30; from then
    # on the deadline leads and service takes the work about to expire: 600 served, arrivals
    # of [15, 45) s (600) less 300 of service lost, those of [45, 60) s queued. In step 1 the
    # 300 queued meet 150 of service before they expire.
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=0, slo_latency_seconds=15)
    run = simulate(np.array([20.0, 0.0]), np.array([1, 1]), spec, step_seconds=60.0)
    assert run.served.tolist() == pytest.approx([600.0, 150.0])
    assert run.unserved.tolist() == pytest.approx([300.0, 150.0])
    assert run.backlog.tolist() == pytest.approx([300.0, 0.0])


def test_billing_counts_warm_up() -> None:
    spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=60, replica_hour_cost=2.0)
    run = simulate(np.zeros(240), np.full(240, 2), spec, initial_ready=1)
    metrics = compute_metrics(run, spec)
    assert metrics.replica_hours == pytest.approx(2.0)
    assert metrics.cost == pytest.approx(4.0)
    assert metrics.cold_starts == 1


def test_desired_must_match_the_rate() -> None:
    with pytest.raises(DataValidationError, match="one entry per step"):
        simulate(np.zeros(3), np.ones(4), SPEC)


schedules = st.lists(st.integers(0, 8), min_size=5, max_size=80)


@settings(max_examples=60, deadline=None)
@given(
    desired=schedules,
    rates=st.lists(st.floats(0.0, 100.0), min_size=80, max_size=80),
    extra=st.lists(st.integers(0, 3), min_size=80, max_size=80),
    scale=st.floats(1.0, 3.0),
    cold=st.sampled_from([0, 15, 40, 100]),
)
def test_more_capacity_never_increases_unserved_work(
    desired: list[int], rates: list[float], extra: list[int], scale: float, cold: int
) -> None:
    n = len(desired)
    rate = np.array(rates[:n])
    base = np.array(desired)
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=cold, slo_latency_seconds=30)
    bigger = WorkloadSpec(
        capacity_per_replica=10.0 * scale, cold_start=cold, slo_latency_seconds=30
    )
    lost = simulate(rate, base, spec).unserved.sum()
    more_replicas = simulate(rate, base + np.array(extra[:n]), spec).unserved.sum()
    more_capacity = simulate(rate, base, bigger).unserved.sum()
    assert more_replicas <= lost + 1e-6
    assert more_capacity <= lost + 1e-6


@settings(max_examples=40, deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 80.0), min_size=8, max_size=40),
    schedule=st.lists(st.integers(1, 10), min_size=40, max_size=40),
    cold=st.sampled_from([0, 15, 60, 120]),
)
def test_oracle_never_costs_more_than_a_schedule_that_serves_on_arrival(
    rates: list[float], schedule: list[int], cold: int
) -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=cold, max_replicas=10)
    # one data value per 15 s step, so the oracle and the candidate see the same steps
    demand = np.array([5.0, *rates])
    obs = Observation(demand, 15.0, 1, spec, sim_step=15.0)
    oracle_run = simulate(obs.sim_rate, make_policy("oracle").plan(obs), spec)
    assert oracle_run.unserved.sum() == 0.0 and oracle_run.backlog.sum() == 0.0
    candidates = [np.array(schedule[: obs.n_steps])]
    for name in ("static", "reactive"):
        candidates.append(make_policy(name).plan(obs))
    oracle_cost = compute_metrics(oracle_run, spec).cost
    for plan in candidates:
        run = simulate(obs.sim_rate, plan, spec)
        if run.unserved.sum() == 0.0 and run.backlog.sum() == 0.0:
            assert oracle_cost <= compute_metrics(run, spec).cost + 1e-9


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), rates=st.lists(st.floats(0.0, 60.0), min_size=20, max_size=20)
)
def test_deterministic_for_a_seed(seed: int, rates: list[float]) -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=ColdStart.lognormal(60, 0.5))
    rate = np.array(rates)
    desired = np.ceil(rate / 10.0).astype(int) + 1
    first = simulate(rate, desired, spec, seed=seed)
    second = simulate(rate, desired, spec, seed=seed)
    for field in ("asked", "ready", "served", "unserved", "backlog"):
        np.testing.assert_array_equal(getattr(first, field), getattr(second, field))


def test_random_cold_starts_depend_on_the_seed() -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=ColdStart.uniform(15, 600))
    desired = np.array([1] * 5 + [6] * 95)
    readies = {tuple(simulate(np.zeros(100), desired, spec, seed=s).ready) for s in range(5)}
    assert len(readies) > 1
