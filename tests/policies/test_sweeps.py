"""Sweep grids search the knobs jointly; the tolerance knob reaches the HPA; the predictive
policy keeps a replica for as long as a recent answer still wants it."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pytest

from forecaster.activation import ACTIVATION_GRID, activation_quantile
from forecaster.policies import Observation, QuantileForecast, make_policy, policy_class
from forecaster.policies.hybrid import TAIL_BUFFER, TAIL_UTILIZATION
from forecaster.policies.predictive import QUANTILE_GRID
from forecaster.policies.reach import BESIDE, REACH
from forecaster.policies.reactive import REACTIVE_PATH_GRID, TOLERANCE_GRID
from forecaster.workload import WorkloadSpec

SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=60, target_utilization=1.0)


def test_hybrid_grid_is_the_joint_product() -> None:
    grid = policy_class("hybrid").sweep_grid(SPEC)
    hpa = [p for p in grid if p["target_utilization"] in REACH]
    joint = [
        p
        for p in grid
        if p["forecast_utilization"] == 1.0 and p["buffer_quantile"] == 0 and p not in hpa
    ]
    pairs = {(p["quantile"], p["target_utilization"], p["tolerance"]) for p in joint}
    assert len(joint) == len(pairs) == len(QUANTILE_GRID) * len(REACTIVE_PATH_GRID) * 2
    # the extra margin points sit past the top quantile, more conservative than any other:
    # a lower forecast utilization, the warm buffer at its top quantile, or a rung of reach
    rungs = [p for p in grid if p["forecast_utilization"] in REACH]
    tail = [p for p in grid if p["forecast_utilization"] in TAIL_UTILIZATION]
    buffered = [p for p in grid if p["buffer_quantile"] > 0]
    assert {p["quantile"] for p in tail + buffered + rungs} == {QUANTILE_GRID[-1]}
    assert len(tail) == len(TAIL_UTILIZATION) * len(REACTIVE_PATH_GRID) * 2
    # and the HPA's own rungs, beside the forecast path at its least margin
    assert {p["quantile"] for p in hpa} == {QUANTILE_GRID[0]}
    assert len(hpa) == len(REACH)
    assert len(joint) + len(tail) + len(buffered) + len(rungs) + len(hpa) == len(grid)
    assert {p["buffer_quantile"] for p in buffered} == set(TAIL_BUFFER)
    assert len(buffered) == len(TAIL_BUFFER) * len(REACTIVE_PATH_GRID) * 2
    assert {p["forecast_utilization"] for p in buffered} == {1.0}


@pytest.mark.parametrize("name", ["reactive", "gpu-utilization", "seasonal-naive", "hybrid"])
def test_every_hpa_policy_sweeps_the_same_tolerances(name: str) -> None:
    grid = policy_class(name).sweep_grid(SPEC)
    assert {p["tolerance"] for p in grid} == set(TOLERANCE_GRID)


def test_quantile_grid_is_fine_in_the_upper_tail() -> None:
    upper = [q for q in QUANTILE_GRID if q >= 0.9]
    assert max(np.diff(upper)) <= 0.05
    assert list(QUANTILE_GRID) == sorted(QUANTILE_GRID)


def test_tolerance_zero_scales_on_a_five_percent_rise() -> None:
    # 10 replicas at target 10 each; demand steps from 100 to 105 (ratio 1.05)
    demand = np.array([100.0] * 10 + [105.0] * 10)
    obs = Observation(demand, 60.0, 5, SPEC)
    default = make_policy("reactive", target_utilization=1.0).plan(obs)
    tight = make_policy("reactive", target_utilization=1.0, tolerance=0.0).plan(obs)
    assert default.max() == 10  # inside the default 10 % band
    assert tight.max() == 11


def test_predictive_keeps_replicas_for_one_cold_start_after_the_forecast_falls() -> None:
    # 60 s data and cold start: horizons 2..2. The forecast of every origin is 30 until
    # origin 9, then 10: sized 3 then 1. The answer falls at t = 600 s (sim step 20). The
    # demand of step i was sized by the answer of step i - 4 (60 s before), so the 3 stay
    # until the answers of steps 20-24 all say 1: through step 23.
    n = 20
    values = np.where(np.arange(n) < 9, 30.0, 10.0)[:, None, None]
    forecast = QuantileForecast(values, (2,), (0.9,))
    obs = Observation(np.full(n, 10.0), 60.0, 5, SPEC, forecast=forecast)
    plan = make_policy("predictive", quantile=0.9).plan(obs)
    sized = np.repeat([3] * 5 + [1] * 10, 4)  # steps from t = 300 s, 4 per data step
    assert plan[:20].tolist() == sized[:20].tolist()
    assert plan[20:24].tolist() == [3, 3, 3, 3]
    assert plan[24:].tolist() == [1] * (len(plan) - 24)


def test_every_tuned_policy_gets_about_the_same_budget_of_settings() -> None:
    """Equal tuning resolution: no policy wins by having been searched more finely."""
    budgets = {
        name: len(policy_class(name).sweep_grid(SPEC))
        for name in (
            "static",
            "reactive",
            "gpu-utilization",
            "seasonal-naive",
            "predictive",
            "hybrid",
        )
    }
    assert max(budgets.values()) <= 1.3 * min(budgets.values()), budgets


def test_the_reactive_hpa_knob_is_searched_finely() -> None:
    utilizations = sorted(
        {p["target_utilization"] for p in policy_class("reactive").sweep_grid(SPEC)}
    )
    fine = [u for u in utilizations if u not in REACH]
    assert max(b - a for a, b in itertools.pairwise(fine)) <= 0.025 + 1e-12
    assert fine[0] <= 0.3 and fine[-1] == 1.0
    assert min(fine) > max(REACH)  # the rungs lie past the cautious end


# The margin each open-ended policy's path carries at a rung: (name, knob, value at u).
RUNG_MARGINS = [
    ("reactive", "target_utilization", lambda u: u),
    ("dynamo-planner", "target_utilization", lambda u: u),
    ("predictive", "target_utilization", lambda u: u),
    ("hybrid", "forecast_utilization", lambda u: u),
    ("aws-predictive", "forecast_utilization", lambda u: u),
    ("crane-dsp", "margin", lambda u: 1 / u - 1),
    ("seasonal-naive", "headroom", lambda u: 1 / u),
]


@pytest.mark.parametrize(("name", "knob", "at"), RUNG_MARGINS)
def test_every_open_ended_grid_reaches_the_same_rungs(
    name: str, knob: str, at: Callable[[float], float]
) -> None:
    """Equal reach: each open-ended policy sizes its margin-carrying path at the same rung
    utilizations, past the most cautious setting of its fine grid."""
    grid = policy_class(name).sweep_grid(SPEC)
    rung_values = [at(u) for u in REACH]
    reached = [p for p in grid if any(np.isclose(p.get(knob, np.nan), v) for v in rung_values)]
    assert sorted(p[knob] for p in reached) == pytest.approx(sorted(rung_values))
    for params in reached:
        make_policy(name, **params)  # the policy accepts it
    # past the fine grid: a margin (the rungs' replicas per unit of load) above all of it
    margin = (lambda v: 1 / v) if knob.endswith("utilization") else (lambda v: v)
    fine = [margin(p[knob]) for p in grid if p not in reached]
    assert min(margin(v) for v in rung_values) > max(fine)
    if knob != "target_utilization":  # beside the reactive path at its hottest
        assert all(p["target_utilization"] == BESIDE["target_utilization"] for p in reached)


# Every policy that adds a path beside the HPA's own, and the knob of that path at its
# least margin.
BESIDE_HPA = [
    ("hybrid", "quantile", QUANTILE_GRID[0]),
    ("seasonal-naive", "headroom", 0.7),
    ("aws-predictive", "forecast_utilization", 1.0),
    ("crane-dsp", "margin", 0.0),
    ("buffered", "buffer_quantile", 0.5),
    ("keda-cron", "quantile", 0.5),
]


@pytest.mark.parametrize(("name", "knob", "least"), BESIDE_HPA)
def test_a_policy_beside_the_hpa_holds_every_rung_the_hpa_alone_has(
    name: str, knob: str, least: float
) -> None:
    """Equal reach on both paths: the HPA's rungs, its added path at its least margin, so
    it never costs more than the HPA for want of one."""
    hpa = {
        (p["target_utilization"], p["tolerance"])
        for p in policy_class("reactive").sweep_grid(SPEC)
        if p["target_utilization"] in REACH
    }
    grid = policy_class(name).sweep_grid(SPEC)
    beside = [p for p in grid if p["target_utilization"] in REACH]
    assert {(p["target_utilization"], p["tolerance"]) for p in beside} == hpa
    assert len(beside) == len(REACH)
    assert all(p[knob] == least for p in beside)
    assert min(p[knob] for p in grid) == least or max(p[knob] for p in grid) == least


def test_hybrid_at_the_hpas_rung_keeps_what_the_hpa_keeps_and_the_forecast_adds() -> None:
    """At an HPA rung hybrid's plan is the reactive HPA's, and larger only where the
    forecast asks for more."""
    rung = next(
        p for p in policy_class("hybrid").sweep_grid(SPEC) if p["target_utilization"] == 0.2
    )
    demand = np.array([20.0] * 30 + [60.0] * 30 + [20.0] * 30)
    forecast = np.where(np.arange(90) < 60, 5.0, 400.0)[:, None, None]
    quantiles = QuantileForecast(forecast, (2,), (QUANTILE_GRID[0],))
    obs = Observation(demand, 60.0, 5, SPEC, forecast=quantiles)
    reactive = make_policy("reactive", target_utilization=0.2, tolerance=rung["tolerance"])
    alone = reactive.plan(obs)
    hybrid = make_policy("hybrid", **rung).plan(obs)
    assert (hybrid >= alone).all()
    quiet = hybrid[: len(hybrid) // 2]
    assert quiet.tolist() == alone[: len(hybrid) // 2].tolist()  # a low forecast adds nothing
    assert hybrid.max() > alone.max()  # a forecast of 400 at utilization 1 does


def test_waking_from_zero_tunes_the_activation_probability_at_the_same_budget() -> None:
    zero = dataclasses.replace(SPEC, min_replicas=0)
    grid = policy_class("hybrid").sweep_grid(zero)
    assert len(grid) == len(policy_class("hybrid").sweep_grid(SPEC))
    assert {p["activation_probability"] for p in grid} == set(ACTIVATION_GRID)
    # the HPA's rungs keep their margin and wake on the least chance of demand
    rungs = [p for p in grid if p["target_utilization"] in REACH]
    assert len(rungs) == len(REACH)
    assert {p["activation_probability"] for p in rungs} == {min(ACTIVATION_GRID)}
    assert {(p["quantile"], p["activation_probability"], p["tolerance"]) for p in grid} >= set(
        itertools.product(QUANTILE_GRID, ACTIVATION_GRID, TOLERANCE_GRID)
    )
    # each rule reads a quantile the walk-forward forecasts carry
    assert {activation_quantile(p) for p in ACTIVATION_GRID} <= set(QUANTILE_GRID)
    budgets = {
        name: len(policy_class(name).sweep_grid(zero))
        for name in ("static", "reactive", "seasonal-naive", "predictive", "hybrid")
    }
    assert max(budgets.values()) <= 1.3 * min(budgets.values()), budgets
