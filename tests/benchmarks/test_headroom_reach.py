"""The headroom-reach benchmark: its rungs lie past every grid, and its verdict."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.headroom_reach import RUNGS, cheapest_adaptive, ladders, parse_args
from forecaster.policies import make_policy, policy_class
from forecaster.workload import WorkloadSpec

SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=300)
# The knob each extended policy's margin rides on, and whether a rung lowers or raises it.
KNOBS = {
    "reactive": ("target_utilization", min),
    "dynamo-planner": ("target_utilization", min),
    "predictive": ("target_utilization", min),
    "hybrid": ("forecast_utilization", min),
    "aws-predictive": ("forecast_utilization", min),
    "crane-dsp": ("margin", max),
}


def test_every_rung_is_a_valid_setting_past_the_cautious_end_of_its_grid() -> None:
    rungs = ladders()
    assert set(rungs) == set(KNOBS)
    for name, settings in rungs.items():
        assert len(settings) == len(RUNGS)
        knob, cautious = KNOBS[name]
        end = cautious(p[knob] for p in policy_class(name).sweep_grid(SPEC))
        for params in settings:
            make_policy(name, **params)  # the policy accepts it
            assert cautious(params[knob], end) == params[knob] != end, (name, params)
            # every other setting of the rung is one the grid already has
            grid_keys = set(policy_class(name).sweep_grid(SPEC)[0])
            assert set(params) <= grid_keys, (name, params)


def _row(cost: float, meets: bool) -> dict[str, Any]:
    return {"cost": cost, "meets_slo": meets}


def test_the_verdict_is_the_cheapest_adaptive_policy_holding_the_slo() -> None:
    rows = {
        "static": _row(10.0, True),
        "oracle": _row(5.0, True),
        "reactive": _row(40.0, True),
        "hybrid": _row(30.0, False),
        "dynamo-planner": _row(50.0, True),
    }
    assert cheapest_adaptive(rows) == "reactive"
    assert cheapest_adaptive({"hybrid": _row(30.0, False), "oracle": _row(5.0, True)}) is None


def test_unknown_traces_exit_2_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(["--traces", "twitter_volume_amzn_5min,wikipedia"])
    assert raised.value.code == 2
    assert "unknown traces ['wikipedia']" in capsys.readouterr().err
