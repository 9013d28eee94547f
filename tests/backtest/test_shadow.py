"""The shadow replay's fleets on tiny hand-checked traces (1-minute cells, 15 s steps)."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.backtest.shadow import replay, stabilized
from forecaster.workload import WorkloadPolicy, WorkloadSpec

STEP = 60


def policy(cold_start: float) -> WorkloadPolicy:
    spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=cold_start, min_replicas=1,
                        max_replicas=10, slo_latency_seconds=30.0)  # fmt: skip
    return WorkloadPolicy(spec)


def test_asks_under_the_measured_fleet_leave_it_unchanged() -> None:
    demand = np.array([1.0, 2.0, 2.0, 1.0])
    replicas = np.array([2, 2, 3, 2])
    result = replay(demand, STEP, policy(0.0), np.ones(4, dtype=int), replicas)
    assert result.prewarm_metrics == result.actual_metrics
    assert result.actual_metrics.replica_hours == pytest.approx(9 / 60)
    assert result.actual_metrics.unserved_fraction == 0.0
    assert result.added_hours == 0.0


def test_a_spike_the_hpa_missed_is_served_by_capacity_asked_a_cold_start_earlier() -> None:
    # Demand jumps to 4 at cell 3; the HPA's replicas arrive one cell late, ready another
    # cell later. prewarm asked for 4 from cell 1, a minute (its cold start) ahead.
    demand = np.array([1.0, 1.0, 1.0, 4.0, 4.0, 4.0])
    replicas = np.array([1, 1, 1, 1, 4, 4])
    ready = np.array([1, 1, 1, 1, 1, 4])
    asks = np.array([1, 1, 4, 4, 4, 4])
    result = replay(demand, STEP, policy(60.0), asks, replicas, ready)
    assert result.actual_metrics.unserved_fraction > 0
    assert result.prewarm_metrics.unserved_fraction == 0.0
    # the actual fleet dropped work in cells 3 and 4 (after the 30 s deadline of cell 3)
    # while the hybrid fleet's 4 replicas were ready
    assert result.added_hours == pytest.approx(np.count_nonzero(result.actual.unserved) * 15 / 3600)
    assert result.added_hours > 0
    assert result.measured


def test_idle_hours_count_replicas_prewarm_did_not_ask_for_and_the_demand_did_not_need() -> None:
    demand = np.array([1.0, 1.0])
    result = replay(demand, STEP, policy(0.0), np.array([1, 1]), np.array([3, 3]))
    assert result.idle_hours == pytest.approx(2 / 60)
    assert result.prewarm_metrics.replica_hours == result.actual_metrics.replica_hours


def test_an_ask_is_kept_for_the_hpa_scale_down_window() -> None:
    asks = np.array([5] + [1] * 25)
    kept = stabilized(asks, 15.0)
    assert kept[:21].tolist() == [5] * 21  # 300 s after the ask, the window still holds it
    assert kept[21:].tolist() == [1] * 5
