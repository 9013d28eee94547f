"""The tuning-rules benchmark: every policy held to a stricter share of the SLO on tuning."""

from __future__ import annotations

import numpy as np

from benchmarks.backtest_savings import POLICIES
from benchmarks.tuning_rules import MARGINS, apply_rules, label, markdown
from forecaster.backtest.frontier import PolicyPoint, sweep
from forecaster.backtest.tuning import TUNING, VALIDATION, split
from forecaster.policies import Observation
from forecaster.workload import WorkloadSpec


def frontier() -> dict[str, list[PolicyPoint]]:
    """The reactive HPA swept over six hours of bursty minutes, measured on each half."""
    rng = np.random.default_rng(3)
    demand = 40 + 5 * rng.normal(size=480)
    demand[rng.choice(np.arange(120, 480), 12, replace=False)] *= 3
    obs = Observation(np.clip(demand, 0, None), 60.0, 120, WorkloadSpec(capacity_per_replica=10.0))
    return sweep(obs, ["reactive"], windows=split(obs.n_steps, obs.scored))


def test_a_stricter_rule_takes_the_cheapest_setting_within_its_share_of_the_slo() -> None:
    points = frontier()["reactive"]
    unserved = sorted(p.windows[TUNING].unserved_fraction for p in points)
    slo = unserved[len(unserved) // 2]  # half the settings meet it on tuning
    rules = apply_rules({"reactive": points}, slo, 3.0)
    assert list(rules) == [label(m) for m in MARGINS] == ["1", "1/2", "1/4"]
    chosen = {}
    for margin in MARGINS:
        within = [p for p in points if p.windows[TUNING].unserved_fraction <= slo * margin]
        assert within  # the sweep's safest settings leave nothing unserved
        best = min(within, key=lambda p: p.windows[TUNING].cost)
        row = rules[label(margin)]["reactive"]
        assert row["params"] == best.params
        assert row["cost"] == best.windows[VALIDATION].cost
        assert row["meets_slo"] == (best.windows[VALIDATION].unserved_fraction <= slo)
        chosen[margin] = best.windows[TUNING].cost
    # the margin buys a safer, dearer setting on this trace
    assert chosen[1.0] < chosen[0.25]


def test_the_report_counts_the_policies_meeting_the_slo_and_the_peers_beaten() -> None:
    def policy(cost: float, meets: bool) -> dict[str, object]:
        return {
            "params": {},
            "cost": cost,
            "unserved_fraction": 0.0 if meets else 0.01,
            "meets_slo": meets,
        }

    plain = {p: policy(10.0, True) for p in POLICIES} | {"hybrid": policy(8.0, True)}
    strict = {p: policy(12.0, p != "static") for p in POLICIES} | {"hybrid": policy(9.0, False)}
    rows = {"t": {"rules": {"1": plain, "1/2": strict, "1/4": strict}, "seconds": 1.0}}
    text = markdown(rows, "lightgbm")
    n = len(POLICIES)
    # static and hybrid miss under the stricter rules; hybrid costs 9/8, the rest 12/10
    assert f"| t | {n}/{n} | {n - 2}/{n} | {n - 2}/{n} | 8 | misses (1.00%) |" in text
    assert "| 4/4 | - | - |" in text
    assert f"rule 1/2: {((n - 1) * 1.2 + 9 / 8) / n:.3f}x over {n} policy-trace pairs" in text
    # every policy's cost under each rule, in the policies' order
    header = "| trace | " + " | ".join(POLICIES) + " |"
    plain_table, strict_table = text.split("## Validation cost per policy, rule ")[1:3]
    assert plain_table.startswith("1\n") and strict_table.startswith("1/2\n")
    cells = {p: "8" if p == "hybrid" else "10" for p in POLICIES}
    assert header + "\n" in plain_table
    assert "| t | " + " | ".join(cells[p] for p in POLICIES) + " |" in plain_table
    strict_cells = {p: "misses (1.00%)" if p in ("static", "hybrid") else "12" for p in POLICIES}
    assert "| t | " + " | ".join(strict_cells[p] for p in POLICIES) + " |" in strict_table


def test_the_report_says_when_no_pair_met_the_plain_rule() -> None:
    missed = {
        p: {"params": {}, "cost": 10.0, "unserved_fraction": 0.01, "meets_slo": False}
        for p in POLICIES
    }
    rows = {"t": {"rules": {"1": missed, "1/2": missed, "1/4": missed}, "seconds": 1.0}}
    text = markdown(rows, "lightgbm")
    assert "- rule 1/2: no policy met the SLO on validation under rule `1`" in text
    assert "nan" not in text
