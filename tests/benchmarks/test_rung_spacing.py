"""The rung-spacing benchmark: the ladder it swaps in, its parsing and its report."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.backtest_savings import POLICIES
from benchmarks.rung_spacing import FINER, best_peer, ladder, ladder_arg, markdown, verdict
from forecaster.policies import PEER_POLICIES, policy_class, reach
from forecaster.workload import WorkloadSpec

SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=60, target_utilization=1.0)


def reactive_utilizations() -> set[float]:
    return {p["target_utilization"] for p in policy_class("reactive").sweep_grid(SPEC)}


def test_the_ladder_ends_every_grid_built_inside_and_the_served_one_returns() -> None:
    served = reach.REACH
    before = reactive_utilizations()
    with pytest.raises(RuntimeError), ladder(FINER):
        inside = reactive_utilizations()
        hybrid = {p["forecast_utilization"] for p in policy_class("hybrid").sweep_grid(SPEC)}
        raise RuntimeError("a backtest that fails still restores the served ladder")
    assert set(FINER) <= inside and set(FINER) <= hybrid
    assert inside - set(FINER) == before - set(served)  # the fine grid is untouched
    assert served == reach.REACH and reactive_utilizations() == before


def test_the_finer_ladder_is_the_reactive_knobs_own_spacing_past_the_fine_grid() -> None:
    assert FINER == (0.275, 0.25, 0.225, 0.2, 0.175, 0.15, 0.125, 0.1)
    assert set(reach.REACH) < set(FINER)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("0.2,abc", "takes numbers"),
        ("0.3,0.2", "in (0, 0.3)"),
        ("0.2,0", "in (0, 0.3)"),
        ("", "in (0, 0.3)"),
        ("0.1,0.2", "from most to least"),
        ("0.2,0.2,0.1", "from most to least"),
    ],
)
def test_a_bad_ladder_is_a_usage_error_echoing_it(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--ladder") as caught:
        ladder_arg(text)
    assert says in str(caught.value) and repr(text) in str(caught.value)


def test_a_good_ladder_parses_most_first() -> None:
    assert ladder_arg("0.25, 0.2,0.15") == (0.25, 0.2, 0.15)


def deployed(costs: dict[str, float | None]) -> dict[str, dict[str, object]]:
    """Every policy at 100 and holding the SLO, but for ``costs`` (None: it misses)."""
    rows = {}
    for policy in POLICIES:
        cost = costs.get(policy, 100.0)
        rows[policy] = {
            "params": {"u": 0.2},
            "cost": 100.0 if cost is None else cost,
            "unserved_fraction": 0.002 if cost is None else 0.0,
            "meets_slo": cost is not None,
        }
    return rows


def test_verdicts_say_who_holds_the_slo_and_the_saving_where_both_do() -> None:
    assert verdict(deployed({"hybrid": 80.0}), "reactive") == "+20.0%"
    assert verdict(deployed({"reactive": None}), "reactive") == "only hybrid holds"
    assert verdict(deployed({"hybrid": None}), "reactive") == "only reactive holds"
    both = deployed({"hybrid": None, "reactive": None})
    assert verdict(both, "reactive") == "neither holds"
    cheapest = PEER_POLICIES[-1]
    assert best_peer(deployed({cheapest: 50.0})) == cheapest
    assert best_peer(deployed({p: None for p in PEER_POLICIES})) is None


def test_the_report_sets_the_ladders_side_by_side_under_each_rule() -> None:
    served = deployed({"hybrid": 80.0})
    finer = deployed({"reactive": None, "hybrid": 90.0, "static": 120.0})
    finer["hybrid"]["params"] = {"u": 0.175}
    strict = deployed({"hybrid": 95.0})
    rows = {
        "t": {
            "served": {"rules": {"1": served, "1/2": served, "1/4": strict}},
            "finer": {"rules": {"1": finer, "1/2": finer, "1/4": strict}},
        }
    }
    text = markdown(rows, {"served": (0.2, 0.1), "finer": (0.2, 0.15, 0.1)}, "m", 12.0, 2)
    assert "`served` (0.2, 0.1), `finer` (0.2, 0.15, 0.1)" in text
    assert "`1/2` is served" in text and "in 12 s with 2 worker(s)" in text
    best = PEER_POLICIES[0]  # every peer at 100: the first of the cheapest
    assert f"| t | +20.0% | only hybrid holds | +20.0% ({best}) | +10.0% ({best}) |" in text
    # per rule, served / finer: the stricter rule agrees across the ladders here
    assert "| t | +20.0% / only hybrid holds | +20.0% / only hybrid holds | +5.0% / +5.0% |" in text
    assert "## t, rule 1/2" in text
    assert "| hybrid | 80 | 90 | 1.125 | u=0.175 |" in text
    assert "| reactive | 100 | misses (0.20%) | 1.000 |  |" in text
    assert "| static | 100 | 120 | 1.200 |  |" in text
