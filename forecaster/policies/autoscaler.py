"""The autoscaler a :class:`~forecaster.workload.WorkloadPolicy` deploys, simulated or real.

One policy and one :class:`HPABehavior` (the simulator's Kubernetes defaults,
:data:`DEFAULT_BEHAVIOR`) give both the HPA the backtest simulates (:func:`reactive_policy`,
:func:`hybrid_policy`) and the ``autoscaling/v2`` spec fields ``prewarm manifests`` renders
(:func:`hpa_spec`). :func:`hpa_spec` reads its targets and behavior from the very
:class:`HybridPolicy` object the backtest runs, so the two cannot disagree.

The rendered HPA has two metrics, both ``AverageValue`` targets as the simulator computes
them (``ceil(usage / target)``, tolerance on ``usage / (target * current)``):

- the forecast path: prewarm's ``prewarm_forecast_demand`` with target
  ``capacity_per_replica * forecast_utilization``;
- the reactive path: the observed demand with target ``capacity_per_replica *
  target_utilization`` (:attr:`WorkloadPolicy.demand_target`).

Metric identities (names, selectors, which API serves them) are deployment wiring and come in
as arguments; this module only fills in what the policy decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from forecaster.exceptions import ConfigError
from forecaster.policies.hpa import HPABehavior, ScalingRules
from forecaster.policies.hybrid import HybridPolicy
from forecaster.policies.reactive import ReactivePolicy
from forecaster.workload import DEFAULT_TOLERANCE, WorkloadPolicy

# The HPA the backtest simulates: Kubernetes' defaults (sync 15 s, 300 s scale-down window,
# scale-up Percent 100 / Pods 4 per 15 s); the policy adds its per-HPA tolerance.
DEFAULT_BEHAVIOR = HPABehavior()

# A metric source without its target, e.g. ``{"type": "External", "external": {"metric":
# {...}}}``; :func:`hpa_spec` adds ``target`` under the source's own key.
MetricSource = Mapping[str, Any]


def reactive_policy(
    policy: WorkloadPolicy, behavior: HPABehavior = DEFAULT_BEHAVIOR
) -> ReactivePolicy:
    """The backtest's ``reactive`` policy for ``policy``: the HPA on the demand alone."""
    return ReactivePolicy(
        target_utilization=policy.reactive_u, behavior=behavior, tolerance=policy.tolerance
    )


def hybrid_policy(policy: WorkloadPolicy, behavior: HPABehavior = DEFAULT_BEHAVIOR) -> HybridPolicy:
    """The backtest's ``hybrid`` policy for ``policy``: the HPA on the forecast and the demand,
    at the settings the backtest tunes (:meth:`WorkloadPolicy.settings`) and with the learned
    warm buffer."""
    return HybridPolicy(
        **policy.settings(),
        hold=policy.hold,
        behavior=behavior,
        buffer=(policy.buffer, policy.buffer_level) if policy.buffer else None,
    )


def hpa_spec(
    policy: WorkloadPolicy,
    forecast_metric: MetricSource,
    demand_metric: MetricSource,
    behavior: HPABehavior = DEFAULT_BEHAVIOR,
) -> dict[str, Any]:
    """``minReplicas``, ``maxReplicas``, ``metrics`` and ``behavior`` of the simulated HPA.

    Targets are plain numbers (the caller writes them as Quantity strings). ``tolerance``
    appears under ``behavior.scaleUp`` / ``scaleDown`` only where it differs from the
    Kubernetes default of 10 %, since the field needs Kubernetes 1.33+ with a feature gate.

    Examples
    --------
    >>> from forecaster.workload import WorkloadSpec
    >>> spec = hpa_spec(
    ...     WorkloadPolicy(WorkloadSpec(capacity_per_replica=4.0), target_utilization=1.0,
    ...                    forecast_utilization=1.0, tolerance=0.0),
    ...     {"type": "External", "external": {"metric": {"name": "forecast"}}},
    ...     {"type": "External", "external": {"metric": {"name": "demand"}}},
    ... )
    >>> [m["external"]["target"] for m in spec["metrics"]]
    [{'type': 'AverageValue', 'averageValue': 4.0}, {'type': 'AverageValue', 'averageValue': 4.0}]
    >>> spec["behavior"]["scaleUp"]["tolerance"], spec["behavior"]["scaleDown"]["tolerance"]
    (0.0, 0.0)
    """
    simulated = hybrid_policy(policy, behavior)
    workload = policy.spec
    return {
        "minReplicas": workload.min_replicas,
        "maxReplicas": workload.max_replicas,
        "metrics": [
            _with_target(forecast_metric, simulated.forecast_target(workload)),
            _with_target(demand_metric, simulated.demand_target(workload)),
        ],
        "behavior": behavior_spec(simulated.hpa_behavior()),
    }


def behavior_spec(behavior: HPABehavior) -> dict[str, Any]:
    """``spec.behavior`` of ``behavior``, every field explicit (nothing left to defaults)."""
    return {
        "scaleUp": _rules_spec(behavior.scale_up, behavior.up_tolerance),
        "scaleDown": _rules_spec(behavior.scale_down, behavior.down_tolerance),
    }


def _rules_spec(rules: ScalingRules, tolerance: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stabilizationWindowSeconds": rules.stabilization_window_seconds,
        "selectPolicy": rules.select_policy,
        "policies": [
            {"type": p.type, "value": p.value, "periodSeconds": p.period_seconds}
            for p in rules.policies
        ],
    }
    if tolerance != DEFAULT_TOLERANCE:
        out["tolerance"] = tolerance
    return out


def _with_target(source: MetricSource, average_value: float) -> dict[str, Any]:
    """``source`` with an ``AverageValue`` target under its type's key (``external``...)."""
    key = str(source["type"]).lower()
    if key not in source:
        raise ConfigError(f"a metric source of `type` {source['type']!r} needs a {key!r} key")
    target = {"type": "AverageValue", "averageValue": average_value}
    return {**source, key: {**source[key], "target": target}}
