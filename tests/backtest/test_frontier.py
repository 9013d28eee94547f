"""Sweeps, cost at SLO and savings."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.backtest.frontier import PolicyPoint, cost_at_slo, headline_point, savings, sweep
from forecaster.backtest.metrics import Metrics
from forecaster.policies import Observation
from forecaster.policies.reach import REACH
from forecaster.policies.reactive import TOLERANCE_GRID, UTILIZATION_GRID
from forecaster.policies.static import HEADROOM_GRID as STATIC_HEADROOM
from forecaster.workload import WorkloadSpec


def point(cost: float, unserved: float) -> PolicyPoint:
    metrics = Metrics(cost, cost, unserved, 0.0, 0, 0, 0.5)
    return PolicyPoint("p", {"knob": cost}, metrics)


def test_cost_at_slo_is_the_cheapest_point_meeting_it() -> None:
    points = [point(10.0, 0.01), point(20.0, 0.0005), point(30.0, 0.0)]
    chosen = cost_at_slo(points, 0.001)
    assert chosen is not None and chosen.metrics.cost == 20.0
    assert cost_at_slo(points, 0.0001) is points[2]


def test_headline_falls_back_to_the_least_unserved_point() -> None:
    points = [point(10.0, 0.01), point(20.0, 0.005)]
    assert headline_point(points, 0.001) == (points[1], False)
    assert headline_point(points, 0.02) == (points[0], True)


def test_savings_are_null_where_undefined() -> None:
    result = savings({"hybrid": None, "reactive": 100.0, "oracle": 50.0})
    assert result == {
        "vs_reactive": None,
        "vs_static": None,
        "vs_seasonal_naive": None,
        "oracle_gap": None,
    }
    result = savings({"hybrid": 90.0, "static": 120.0, "seasonal-naive": 100.0, "oracle": 60.0})
    assert result["vs_static"] == pytest.approx(0.25)
    assert result["vs_seasonal_naive"] == pytest.approx(0.1)
    assert result["oracle_gap"] == pytest.approx(0.5)


def test_sweep_reaches_every_grid_point_and_headroom_buys_service() -> None:
    rng = np.random.default_rng(0)
    demand = 40 + 20 * np.sin(np.arange(400) / 30) + rng.gamma(2.0, 4.0, 400)
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=120, max_replicas=30)
    obs = Observation(demand, 60.0, 200, spec, train_window=200)
    calls: list[tuple[str, int, int]] = []
    result = sweep(obs, ["static", "reactive"], progress=lambda *a: calls.append(a))
    # static: every headroom; reactive: every utilization x both tolerances, and the rungs
    sizes = [len(STATIC_HEADROOM), len(UTILIZATION_GRID) * len(TOLERANCE_GRID) + len(REACH)]
    assert [len(points) for points in result.values()] == sizes
    assert calls[-1] == ("reactive", sum(sizes), sum(sizes))
    static = result["static"]
    costs = [p.metrics.cost for p in static]
    lost = [p.metrics.unserved_fraction for p in static]
    # more headroom costs more and never serves less
    assert costs == sorted(costs)
    assert lost == sorted(lost, reverse=True)
