"""Capacity policies: observations up to ``t`` in, desired replicas out.

One registry, :data:`POLICIES`; :func:`make_policy` builds one by name.
"""

from __future__ import annotations

from forecaster.exceptions import UnknownNameError
from forecaster.policies.aws_predictive import AWSPredictivePolicy
from forecaster.policies.base import Observation, Policy, QuantileForecast
from forecaster.policies.buffered import BufferedPolicy
from forecaster.policies.crane_dsp import CraneDSPPolicy
from forecaster.policies.dynamo_planner import DynamoPlannerPolicy
from forecaster.policies.gpu_utilization import GPUUtilizationPolicy
from forecaster.policies.hybrid import HybridPolicy
from forecaster.policies.keda_cron import KedaCronPolicy
from forecaster.policies.oracle import OraclePolicy
from forecaster.policies.predictive import PredictivePolicy
from forecaster.policies.reactive import ReactivePolicy
from forecaster.policies.seasonal_naive import SeasonalNaivePolicy
from forecaster.policies.static import StaticPolicy

POLICIES: dict[str, type[Policy]] = {
    "static": StaticPolicy,
    "reactive": ReactivePolicy,
    "gpu-utilization": GPUUtilizationPolicy,
    "seasonal-naive": SeasonalNaivePolicy,
    "predictive": PredictivePolicy,
    "buffered": BufferedPolicy,
    "hybrid": HybridPolicy,
    "oracle": OraclePolicy,
    # The autoscalers a user would install instead, each computing its own forecast.
    "crane-dsp": CraneDSPPolicy,
    "dynamo-planner": DynamoPlannerPolicy,
    "aws-predictive": AWSPredictivePolicy,
    "keda-cron": KedaCronPolicy,
}

# The peers above: other projects' autoscalers, compared with hybrid in the savings table.
PEER_POLICIES = ("crane-dsp", "dynamo-planner", "aws-predictive", "keda-cron")

# Policies that read forecasts from a model (the walk-forward must produce them).
FORECAST_POLICIES = frozenset({"predictive", "hybrid"})


def policy_class(name: str) -> type[Policy]:
    """The registered class of ``name``; an unknown name lists the valid ones."""
    try:
        return POLICIES[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown policy {name!r}; valid policies: {', '.join(POLICIES)}"
        ) from None


def make_policy(name: str, **params: object) -> Policy:
    """Build the policy ``name`` with ``params``.

    Examples
    --------
    >>> make_policy("static", headroom=1.2).headroom
    1.2
    """
    return policy_class(name)(**params)


__all__ = [
    "FORECAST_POLICIES",
    "PEER_POLICIES",
    "POLICIES",
    "Observation",
    "Policy",
    "QuantileForecast",
    "make_policy",
    "policy_class",
]
