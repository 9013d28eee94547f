"""A workload's SLO latency defaults by its tier: real time 30 s, batch minutes."""

from __future__ import annotations

from typing import Any

import pytest

from forecaster.exceptions import ConfigError
from training.config import TIER_SLO_LATENCY, parse_config


def config(**capacity: Any) -> dict[str, Any]:
    return {
        "source": {"type": "prometheus", "url": "http://prom:9090"},
        "workloads": [
            {
                "name": "chat",
                "demand": "sum(x)",
                "capacity": {"capacity_per_replica": 5, **capacity},
            }
        ],
    }


def slo_latency(**capacity: Any) -> float:
    spec = parse_config(config(**capacity)).policies["chat"].spec
    return spec.slo_latency_seconds


@pytest.mark.parametrize(("tier", "seconds"), [(1, 30), (2, 30), (3, 300)])
def test_the_tier_sets_the_default(tier: int, seconds: int) -> None:
    assert TIER_SLO_LATENCY[tier] == seconds
    assert slo_latency(tier=tier) == seconds


def test_without_a_tier_the_default_tier_decides() -> None:
    assert slo_latency() == 30


@pytest.mark.parametrize("tier", [1, 3])
def test_a_given_slo_latency_wins_over_the_tier(tier: int) -> None:
    assert slo_latency(tier=tier, slo_latency="2m") == 120


def test_an_unknown_tier_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"capacity: `tier` must be one of \[1, 2, 3\], got 4"):
        parse_config(config(tier=4))
