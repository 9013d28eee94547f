"""WorkloadSpec and ColdStart validation and the quantile rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from forecaster.exceptions import ConfigError
from forecaster.workload import ColdStart, WorkloadSpec


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"capacity_per_replica": 0},
            "`capacity_per_replica` must be a finite number >= 1e-06 and <= 1e[+]12, got 0",
        ),
        # an HPA target of a zero quantity; a Decimal past Kubernetes' quantities
        ({"capacity_per_replica": 1e-300}, "`capacity_per_replica` must be .* got 1e-300"),
        ({"capacity_per_replica": 1e300}, "`capacity_per_replica` must be .* got 1e[+]300"),
        ({"capacity_per_replica": True}, "`capacity_per_replica` must be .* got True"),
        # every cost inf, the tuned settings arbitrary
        ({"replica_hour_cost": 1e308}, "`replica_hour_cost` must be a finite number > 0 and"),
        ({"target_utilization": 1.5}, r"`target_utilization` must be in \(0, 1\], got 1.5"),
        ({"min_replicas": -1}, "`min_replicas` must be an integer >= 0, got -1"),
        ({"min_replicas": 5, "max_replicas": 3}, "`max_replicas` must be an integer >= max"),
        ({"replica_hour_cost": -4.0}, "`replica_hour_cost`"),
        ({"slo_latency_seconds": 0}, "`slo_latency_seconds`"),
        ({"slo_unserved_fraction": 1.0}, r"`slo_unserved_fraction` must be in \(0, 1\)"),
        ({"tier": 4}, "`tier` must be one of"),
        ({"quantile": 1.5}, r"`quantile` must be in \(0, 1\), got 1.5"),
        ({"quantile": 0.9, "miss_cost": 1.0}, "either `quantile` or"),
        ({"miss_cost": 9.0}, "`idle_cost` is required"),
        ({"cold_start": "5m"}, "`cold_start` must be a number of seconds"),
        ({"cold_start": -1}, "`cold_start.seconds`"),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_spec_errors_name_the_field(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        WorkloadSpec(**{"capacity_per_replica": 10.0, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "tau"),
    [
        ({"quantile": 0.7}, 0.7),
        ({"miss_cost": 9.0, "idle_cost": 1.0}, 0.9),
        ({"miss_cost": 1.0, "idle_cost": 3.0}, 0.25),
        ({"tier": 1}, 0.99),
        ({"tier": 3}, 0.8),
    ],
    ids=["explicit", "newsvendor-0.9", "newsvendor-0.25", "tier-1", "tier-3"],
)
def test_tau(kwargs: dict[str, Any], tau: float) -> None:
    assert WorkloadSpec(capacity_per_replica=1.0, **kwargs).tau == pytest.approx(tau)


def test_number_becomes_a_fixed_cold_start() -> None:
    spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=120)
    assert spec.cold_start_model == ColdStart.fixed(120)


@pytest.mark.parametrize(
    ("cold_start", "match"),
    [
        (lambda: ColdStart.uniform(300, 100), "low <= high"),
        (lambda: ColdStart.lognormal(0, 0.5), "`cold_start.seconds`"),
        (lambda: ColdStart.lognormal(60, 0), "`cold_start.sigma`"),
        (lambda: ColdStart(kind="gamma"), "`cold_start.kind`"),  # type: ignore[arg-type]
    ],
    ids=["uniform-order", "lognormal-median", "lognormal-sigma", "kind"],
)
def test_cold_start_errors(cold_start: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cold_start()


def test_cold_start_samples_stay_in_range_and_plan_high() -> None:
    rng = np.random.default_rng(0)
    uniform = ColdStart.uniform(60, 180)
    draws = uniform.sample(rng, 1000)
    assert draws.min() >= 60 and draws.max() <= 180
    lognormal = ColdStart.lognormal(120, 0.4)
    draws = lognormal.sample(rng, 20000)
    assert np.median(draws) == pytest.approx(120, rel=0.05)
    assert np.mean(draws <= lognormal.planning_seconds) == pytest.approx(0.95, abs=0.01)
