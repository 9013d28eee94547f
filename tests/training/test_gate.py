"""The promotion rule, branch by branch, on hand-made scores."""

from __future__ import annotations

import pandas as pd
import pytest

from training.config import GateConfig
from training.gate import decide
from training.scoring import ModelScore, WorkloadScore


def workload(
    name: str,
    *,
    pinball: float = 0.1,
    coverage: float = 0.9,
    cost: float | None = 100.0,
    unserved: float = 0.0005,
) -> WorkloadScore:
    return WorkloadScore(
        workload=name,
        tau=0.9,
        pinball=pinball,
        pinball_by_horizon={1: pinball},
        coverage={0.9: coverage},
        mae=1.0,
        costs={"predictive": cost},
        unserved={"predictive": unserved},
        meets_slo={"predictive": cost is not None},
        frontier={},
        observation=None,  # type: ignore[arg-type]  # not read by the gate
        times=pd.DatetimeIndex([]),
    )


def model(*workloads: WorkloadScore) -> ModelScore:
    return ModelScore(
        {w.workload: w for w in workloads}, pd.Timestamp("2026-01-01"), pd.Timestamp("2026-01-02")
    )


GATE = GateConfig()
CHAMPION = model(workload("a"), workload("b", cost=50.0))


@pytest.mark.parametrize(
    ("candidate", "promote", "reason"),
    [
        pytest.param(
            model(workload("a", cost=90.0), workload("b", cost=50.0)),
            True, "cost at SLO (predictive) 140.00 <= champion 150.00", id="cheaper",
        ),
        pytest.param(
            model(workload("a", cost=120.0), workload("b", cost=50.0)),
            False, "cost at SLO (predictive) 170.00 > champion 150.00", id="dearer",
        ),
        pytest.param(
            model(workload("a", pinball=0.2, cost=90.0), workload("b", cost=50.0)),
            False, "pinball 0.1500 > champion 0.1000", id="worse-pinball",
        ),
        pytest.param(
            model(workload("a", cost=None, unserved=0.01), workload("b", cost=40.0)),
            False, "a: the champion meets the SLO with predictive, the candidate not",
            id="loses-the-slo",
        ),
        pytest.param(
            model(workload("a", coverage=0.7, cost=90.0), workload("b", cost=50.0)),
            False, "coverage guardrail failed on a: q0.9 covers 0.700 < 0.800", id="coverage",
        ),
    ],
)  # fmt: skip
def test_gate_against_a_champion(candidate, promote, reason):
    decision = decide(candidate, CHAMPION, GATE)
    assert decision.promote is promote
    assert reason in decision.summary()


def test_neither_meets_the_slo_the_candidate_must_not_leave_more_unserved():
    champion = model(workload("a", cost=None, unserved=0.01))
    worse = model(workload("a", cost=None, unserved=0.02))
    better = model(workload("a", cost=None, unserved=0.005))
    assert not decide(worse, champion, GATE).promote
    assert "leaves more unserved (0.0200 > 0.0100)" in decide(worse, champion, GATE).summary()
    assert decide(better, champion, GATE).promote


def test_tolerances_allow_a_slightly_worse_candidate():
    candidate = model(workload("a", cost=104.0, pinball=0.104), workload("b", cost=50.0))
    assert not decide(candidate, CHAMPION, GATE).promote
    lenient = GateConfig(cost_tolerance=0.05, pinball_tolerance=0.05)
    assert decide(candidate, CHAMPION, lenient).promote


def test_without_a_champion_only_the_guardrail_applies():
    assert decide(model(workload("a", cost=1e9)), None, GATE).promote
    refused = decide(model(workload("a", coverage=0.5)), None, GATE)
    assert not refused.promote
    assert refused.champion_cost is None
