"""Contract suite run against every registered policy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.exceptions import ConfigError, UnknownNameError
from forecaster.policies import (
    POLICIES,
    Observation,
    Policy,
    QuantileForecast,
    make_policy,
)
from forecaster.workload import WorkloadSpec, horizon_range

DATA_STEP = 60.0
QUANTILES = (0.5, 0.9)
# Test-sized settings: a 1 h season so seasonal-naive runs on a short trace; the peers'
# seasons, intervals and histories shrunk so their forecast paths run on it too.
PARAMS: dict[str, dict[str, object]] = {
    "seasonal-naive": {"season": 3600.0, "level_window": 600.0},
    "crane-dsp": {
        "periods": (1200.0, 600.0),
        "history": 3600.0,
        "update_interval": 600.0,
        "window": 300.0,
    },
    "aws-predictive": {"interval": 120.0, "buffer": 60.0},
    "keda-cron": {"slot": 60.0, "season": 600.0},
}


def build_policy(name: str) -> Policy:
    return make_policy(name, **PARAMS.get(name, {}))


def observation(demand: np.ndarray, spec: WorkloadSpec, start: int, seed: int) -> Observation:
    first, last = horizon_range(spec.cold_start_model.planning_seconds, 0.0, DATA_STEP)
    rng = np.random.default_rng(seed)
    # a noisy but causal-looking forecast: any values will do for the contract
    base = rng.uniform(0.0, demand.max() + 1.0, size=(len(demand), last - first + 1, 1))
    values = np.concatenate([base, base * 1.3], axis=2)
    return Observation(
        demand,
        DATA_STEP,
        start,
        spec,
        train_window=start,
        retrain_every=30,
        forecast=QuantileForecast(values, tuple(range(first, last + 1)), QUANTILES),
    )


traces = st.lists(st.floats(0.0, 500.0), min_size=100, max_size=140).map(np.array)
specs = st.builds(
    WorkloadSpec,
    capacity_per_replica=st.floats(5.0, 50.0),
    cold_start=st.sampled_from([0, 45, 120, 300]),
    target_utilization=st.floats(0.5, 1.0),
    min_replicas=st.integers(0, 3),
    max_replicas=st.integers(3, 40),
    quantile=st.sampled_from(QUANTILES),
)


@pytest.mark.parametrize("name", sorted(POLICIES))
@settings(max_examples=15, deadline=None)
@given(demand=traces, spec=specs, seed=st.integers(0, 100))
def test_replicas_within_bounds(
    name: str, demand: np.ndarray, spec: WorkloadSpec, seed: int
) -> None:
    obs = observation(demand, spec, 70, seed)
    plan = build_policy(name).plan(obs)
    assert plan.shape == (obs.n_steps,)
    assert plan.min() >= spec.min_replicas
    assert plan.max() <= spec.max_replicas


@pytest.mark.parametrize("name", sorted(n for n, cls in POLICIES.items() if not cls.uses_future))
@settings(max_examples=15, deadline=None)
@given(
    demand=traces,
    spec=specs,
    seed=st.integers(0, 100),
    cut=st.integers(72, 99),
    noise=st.floats(1.0, 1000.0),
)
def test_no_look_ahead(
    name: str, demand: np.ndarray, spec: WorkloadSpec, seed: int, cut: int, noise: float
) -> None:
    obs = observation(demand, spec, 70, seed)
    corrupted_demand = demand.copy()
    corrupted_demand[cut:] = noise
    assert obs.forecast is not None
    corrupted_values = obs.forecast.values.copy()
    # origin cut - 1 is observed at time cut * step, so it may not inform earlier decisions
    corrupted_values[cut - 1 :] = noise
    corrupted = Observation(
        corrupted_demand,
        DATA_STEP,
        70,
        spec,
        train_window=obs.train_window,
        retrain_every=obs.retrain_every,
        forecast=QuantileForecast(corrupted_values, obs.forecast.horizons, QUANTILES),
    )
    policy = build_policy(name)
    before = obs.step_times() < cut * DATA_STEP
    np.testing.assert_array_equal(policy.plan(obs)[before], policy.plan(corrupted)[before])


def test_oracle_is_the_only_policy_that_uses_the_future() -> None:
    assert [n for n, cls in POLICIES.items() if cls.uses_future] == ["oracle"]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_sweep_grid_builds_policies(name: str) -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0)
    grid = POLICIES[name].sweep_grid(spec)
    assert grid
    knob = POLICIES[name].knob
    for params in grid:
        policy = make_policy(name, **params)
        if knob is not None:
            assert getattr(policy, knob) == params[knob]


def test_unknown_policy_lists_the_valid_names() -> None:
    with pytest.raises(UnknownNameError, match="valid policies: static, reactive"):
        make_policy("magic")


@pytest.mark.parametrize("name", ["predictive", "hybrid"])
def test_forecast_policies_need_a_forecast(name: str) -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0)
    obs = Observation(np.ones(50), DATA_STEP, 20, spec)
    with pytest.raises(ConfigError, match="needs forecasts"):
        make_policy(name).plan(obs)


def test_predictive_rejects_a_quantile_the_forecast_lacks() -> None:
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=0)
    obs = observation(np.ones(100), spec, 70, 0)
    with pytest.raises(ConfigError, match=r"forecast quantiles \[0.5, 0.9\], got 0.99"):
        make_policy("predictive", quantile=0.99).plan(obs)
