"""The rendered HPA and the simulated HPA read the same settings.

``hpa_spec`` is parsed back into the simulator's own types and compared with what the
backtest's ``reactive`` and ``hybrid`` policies run with, for several policies: a change to
either side alone (a renderer that hard-codes a window, a simulated target computed another
way, a tolerance dropped) makes these fail.
"""

from __future__ import annotations

from typing import Any

import pytest

from forecaster.exceptions import ConfigError
from forecaster.policies import make_policy
from forecaster.policies.autoscaler import (
    DEFAULT_BEHAVIOR,
    hpa_spec,
    hybrid_policy,
    reactive_policy,
)
from forecaster.policies.hpa import HPABehavior, ScalingPolicy, ScalingRules
from forecaster.workload import WorkloadPolicy, WorkloadSpec

SPEC = WorkloadSpec(capacity_per_replica=4.0, cold_start=240, min_replicas=2, max_replicas=30)
FORECAST: dict[str, Any] = {"type": "External", "external": {"metric": {"name": "forecast"}}}
DEMAND: dict[str, Any] = {"type": "Object", "object": {"metric": {"name": "demand"}}}

POLICIES = {
    "defaults": WorkloadPolicy(SPEC),
    "backtest-cheapest": WorkloadPolicy(
        SPEC, quantile=0.5, forecast_utilization=1.0, target_utilization=1.0, tolerance=0.0
    ),
    "served": WorkloadPolicy(SPEC, quantile=0.9, target_utilization=0.8, tolerance=0.1),
    "odd": WorkloadPolicy(
        WorkloadSpec(capacity_per_replica=0.05, min_replicas=0, max_replicas=7),
        quantile=0.99,
        forecast_utilization=0.6,
        target_utilization=0.9,
        tolerance=0.03,
        hold=120,
    ),
}


def _rules(document: dict[str, Any], controller_tolerance: float) -> ScalingRules:
    return ScalingRules(
        stabilization_window_seconds=document["stabilizationWindowSeconds"],
        policies=tuple(
            ScalingPolicy(p["type"], p["value"], p["periodSeconds"]) for p in document["policies"]
        ),
        select_policy=document["selectPolicy"],
        tolerance=document.get("tolerance", controller_tolerance),
    )


def _parsed_behavior(spec: dict[str, Any]) -> HPABehavior:
    """What a Kubernetes HPA controller with default flags runs for the rendered spec."""
    tolerance = HPABehavior().tolerance  # --horizontal-pod-autoscaler-tolerance default
    behavior = spec["behavior"]
    return HPABehavior(
        scale_up=_rules(behavior["scaleUp"], tolerance),
        scale_down=_rules(behavior["scaleDown"], tolerance),
        tolerance=tolerance,
        sync_period_seconds=HPABehavior().sync_period_seconds,
    )


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_rendered_behavior_is_the_simulated_one(policy: WorkloadPolicy) -> None:
    rendered = _parsed_behavior(hpa_spec(policy, FORECAST, DEMAND))
    for simulated in (reactive_policy(policy), hybrid_policy(policy)):
        assert rendered == simulated.hpa_behavior()
        assert (rendered.up_tolerance, rendered.down_tolerance) == (
            policy.tolerance,
            policy.tolerance,
        )


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_rendered_targets_and_bounds_are_the_simulated_ones(policy: WorkloadPolicy) -> None:
    spec = hpa_spec(policy, FORECAST, DEMAND)
    forecast, demand = spec["metrics"]
    assert forecast["external"]["metric"] == FORECAST["external"]["metric"]
    assert demand["object"]["metric"] == DEMAND["object"]["metric"]
    simulated = hybrid_policy(policy)
    assert forecast["external"]["target"] == {
        "type": "AverageValue",
        "averageValue": simulated.forecast_target(policy.spec),
    }
    assert demand["object"]["target"] == {
        "type": "AverageValue",
        "averageValue": simulated.demand_target(policy.spec),
    }
    assert demand["object"]["target"]["averageValue"] == pytest.approx(policy.demand_target)
    assert reactive_policy(policy).demand_target(policy.spec) == simulated.demand_target(
        policy.spec
    )
    assert (spec["minReplicas"], spec["maxReplicas"]) == (
        policy.spec.min_replicas,
        policy.spec.max_replicas,
    )


@pytest.mark.parametrize("policy", POLICIES.values(), ids=POLICIES.keys())
def test_the_simulated_policies_are_the_backtests_for_the_same_settings(
    policy: WorkloadPolicy,
) -> None:
    built = hybrid_policy(policy)
    swept = make_policy("hybrid", **policy.settings(), hold=policy.hold)
    assert vars(built) == vars(swept) | {"behavior": DEFAULT_BEHAVIOR}
    assert built.hpa_behavior() == swept.hpa_behavior()  # type: ignore[attr-defined]


def test_tolerance_is_rendered_only_where_it_is_not_the_default() -> None:
    default = hpa_spec(POLICIES["served"], FORECAST, DEMAND)["behavior"]
    tuned = hpa_spec(POLICIES["backtest-cheapest"], FORECAST, DEMAND)["behavior"]
    assert "tolerance" not in default["scaleUp"] and "tolerance" not in default["scaleDown"]
    assert tuned["scaleUp"]["tolerance"] == tuned["scaleDown"]["tolerance"] == 0.0


def test_a_metric_source_without_its_type_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="`type` 'External' needs a 'external' key"):
        hpa_spec(POLICIES["defaults"], {"type": "External"}, DEMAND)
