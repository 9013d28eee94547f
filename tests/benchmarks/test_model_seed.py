"""The model-seed benchmark: each seed reaches the model, the other policies are the served
run's, its parsing and its report."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks.model_seed import (
    SERVED,
    against_reactive,
    check_seeded,
    markdown,
    model_text,
    n_seeds_arg,
    seed_rows,
    seeded,
    seeds_arg,
    spread,
    stem,
)
from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.backtest.tuning import VALIDATION, safest
from forecaster.exceptions import ConfigError
from forecaster.features import FeatureConfig
from forecaster.models import DEFAULT_MODEL
from forecaster.policies import PEER_POLICIES
from forecaster.workload import WorkloadSpec

STEP = 300
N = 4 * 288  # four days of 5-minute data
SETTINGS = BacktestSettings(
    WorkloadSpec(capacity_per_replica=10.0, cold_start=300, max_replicas=40),
    policies=("reactive", "hybrid"),
    train_window=2 * 86400,
    retrain_every=86400,
    model="lightgbm",
    model_params={"n_estimators": 30},
)


def trace() -> tuple[np.ndarray, pd.DatetimeIndex]:
    rng = np.random.default_rng(3)
    t = np.arange(N)
    values = 80 + 50 * np.sin(2 * np.pi * t / 288) + rng.gamma(2.0, 8.0, N)
    return values, pd.date_range("2026-01-05", periods=N, freq=f"{STEP}s", tz="UTC")


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    return seed_rows(*trace(), STEP, SETTINGS, (1,))


def test_the_served_seed_comes_first_and_is_the_served_backtest(
    rows: dict[str, dict[str, Any]],
) -> None:
    assert list(rows) == ["0", "1"]
    served = backtest(*trace(), STEP, SETTINGS)
    assert set(rows["0"]["rules"]) == {"1", "1/2", "1/4"}
    for policy in ("reactive", "hybrid"):
        chosen = served.deployed[policy]
        assert rows["0"]["rules"][SERVED][policy]["params"] == chosen.params
        assert rows["0"]["rules"][SERVED][policy]["cost"] == chosen.validation.cost
    lowest = safest(served.frontier["hybrid"]).windows[VALIDATION].unserved_fraction
    assert rows["0"]["lowest"]["hybrid"] == lowest


def test_another_seed_moves_hybrid_and_nothing_else(rows: dict[str, dict[str, Any]]) -> None:
    for rule in ("1", "1/2", "1/4"):
        assert rows["1"]["rules"][rule]["reactive"] == rows["0"]["rules"][rule]["reactive"]
    assert rows["1"]["lowest"]["reactive"] == rows["0"]["lowest"]["reactive"]
    # the model's draw reaches hybrid's plan: its validation cost is not the served seed's
    ours = [rows[s]["rules"][SERVED]["hybrid"]["cost"] for s in ("0", "1")]
    assert ours[0] != ours[1]


def test_a_seeded_run_is_hybrid_alone_on_that_seed_keeping_the_models_parameters() -> None:
    lags = FeatureConfig(lags=(0, 1, 2))
    settings = BacktestSettings(SETTINGS.spec, model_params={"features": lags})
    again = seeded(settings, 7)
    assert again.policies == ("hybrid",)
    assert again.model_params == {"features": lags, "random_state": 7}
    assert again.seed == settings.seed  # the simulator's draws stay the served ones


def test_a_model_that_draws_nothing_is_refused_naming_it() -> None:
    check_seeded("lightgbm-window")
    with pytest.raises(ConfigError, match="'ewma' draws nothing at random"):
        check_seeded("ewma")


def test_averaging_boosters_is_refused_for_a_model_that_has_none() -> None:
    check_seeded("lightgbm-window", 4)
    check_seeded("auto")
    with pytest.raises(ConfigError, match="'auto' averages no boosters"):
        check_seeded("auto", 4)


@pytest.mark.parametrize("text", ["0", "-3", "two", "1.5", ""])
def test_a_bad_booster_count_is_a_usage_error_echoing_it(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--n-seeds takes a whole number >= 1"):
        n_seeds_arg(text)


def test_the_booster_count_is_in_the_reports_name_and_file() -> None:
    assert n_seeds_arg("4") == 4
    assert model_text("lightgbm-window", 1) == "lightgbm-window"
    assert model_text("lightgbm-window", 4) == "lightgbm-window` with `n_seeds=4"
    assert stem(DEFAULT_MODEL, True, 4) == "model_seed_n_seeds4"
    assert stem("lightgbm", False, 2) == "model_seed_lightgbm_n_seeds2_subset"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1,x", "takes whole numbers"),
        ("1.5", "takes whole numbers"),
        ("0,1", "other than the served seed 0"),
        ("2,2", "distinct"),
        ("-1", ">= 0"),
        ("", "distinct"),
    ],
)
def test_bad_seeds_are_a_usage_error_echoing_them(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--seeds") as refused:
        seeds_arg(text)
    assert says in str(refused.value) and repr(text) in str(refused.value)


def test_good_seeds_parse_in_order() -> None:
    assert seeds_arg("3, 1,2") == (3, 1, 2)


def tuned(cost: float, holds: bool = True) -> dict[str, Any]:
    return {
        "params": {"quantile": 0.9, "forecast_utilization": 0.8},
        "cost": cost,
        "unserved_fraction": 0.0 if holds else 0.002,
        "meets_slo": holds,
    }


def row(hybrid: list[tuple[float, bool]], stricter: float = 0.0) -> dict[str, Any]:
    """A trace where the reactive HPA costs 100 and every peer 120, hybrid as given; each
    rule stricter than the last adds ``stricter`` to every hybrid cost (the served rule, 1/2,
    costs as given)."""
    seeds = {}
    for seed, (cost, holds) in enumerate(hybrid):
        rules = {}
        for k, rule in enumerate(("1", "1/2", "1/4")):
            deployed = {"reactive": tuned(100.0), "hybrid": tuned(cost + (k - 1) * stricter, holds)}
            rules[rule] = deployed | {p: tuned(120.0) for p in PEER_POLICIES}
        seeds[str(seed)] = {"rules": rules, "lowest": {"hybrid": 0.0003, "reactive": 0.0}}
    return {"seeds": seeds, "seconds": 1.0}


def test_the_spread_is_among_the_seeds_that_hold() -> None:
    assert spread(row([(90.0, True), (99.0, True), (50.0, False)])) == "10.0% (2 of 3 hold)"
    assert spread(row([(90.0, True), (99.0, False)])) == "- (1 of 2 hold)"


def test_against_the_reactive_hpa_ranges_over_the_seeds_where_both_hold() -> None:
    assert against_reactive(row([(90.0, True), (95.0, True)]), "1/2") == "+5.0% to +10.0% (2 of 2)"
    assert against_reactive(row([(90.0, True), (95.0, False)]), "1") == "+10.0% to +10.0% (1 of 2)"
    assert against_reactive(row([(90.0, False)]), "1/4") == "- (0 of 1)"


def test_the_report_shows_each_seeds_cost_verdicts_and_reach() -> None:
    report = markdown(
        {"trace-a": row([(90.0, True), (110.0, False)], stricter=5.0)}, "lightgbm", 12.0, 2
    )
    assert "| trace | seed 0 (served) | seed 1 | spread among the seeds that hold |" in report
    assert "| trace-a | 90 | misses (0.20%) | - (1 of 2 hold) |" in report
    peer = PEER_POLICIES[0]
    assert (
        f"| trace-a | +10.0% | only reactive holds | +25.0% ({peer}) | only {peer} holds ({peer}) |"
        in report
    )
    assert "| trace-a | 0.030% | 0.030% | 0.000% |" in report
    assert "seed 0: quantile=0.9, forecast_utilization=0.8" in report
    assert "in 12 s with 2 worker(s)" in report
    # the served rule's tables read the served rule: hybrid at 90, not 85 or 95
    assert (
        "| trace-a | - (1 of 2 hold) | - (1 of 2 hold) | - (1 of 2 hold) | +15.0% to +15.0% "
        "(1 of 2) | +10.0% to +10.0% (1 of 2) | +5.0% to +5.0% (1 of 2) |" in report
    )


def test_results_are_named_by_model_and_whether_every_trace_ran() -> None:
    assert stem(DEFAULT_MODEL, True) == "model_seed"
    assert stem(DEFAULT_MODEL, False) == "model_seed_subset"
    assert stem("lightgbm", True) == "model_seed_lightgbm"
    # a run with other features than the model's defaults never overwrites the defaults' run
    assert stem(DEFAULT_MODEL, True, 1, features=True) == "model_seed_features"
    named = stem("lightgbm", False, 4, features=True)
    assert named == "model_seed_lightgbm_n_seeds4_features_subset"
