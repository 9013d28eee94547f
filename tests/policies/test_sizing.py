"""Policies size replicas with the live planner's arithmetic, not a copy of it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forecaster.capacity
from forecaster.policies import Observation, make_policy
from forecaster.workload import WorkloadSpec


@settings(max_examples=50, deadline=None)
@given(
    rates=st.lists(st.floats(0.0, 1e4), min_size=1, max_size=30).map(np.array),
    capacity=st.floats(0.1, 100.0),
    utilization=st.floats(0.05, 1.0),
    bounds=st.tuples(st.integers(0, 5), st.integers(1, 200)).filter(lambda b: b[1] >= b[0]),
)
def test_replicas_for_is_the_planners_desired_replicas(
    rates: np.ndarray, capacity: float, utilization: float, bounds: tuple[int, int]
) -> None:
    spec = WorkloadSpec(
        capacity_per_replica=capacity, min_replicas=bounds[0], max_replicas=max(1, bounds[1])
    )
    obs = Observation(np.ones(3), 60.0, 1, spec)
    expected = forecaster.capacity.desired_replicas(
        rates,
        capacity_per_replica=capacity,
        target_utilization=utilization,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )
    assert obs.replicas_for(rates, utilization).tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["static", "oracle"])
def test_policies_call_the_planner(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    calls = []
    real = forecaster.capacity.desired_replicas

    def spy(*args: object, **kwargs: object) -> np.ndarray:
        calls.append(kwargs)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(forecaster.capacity, "desired_replicas", spy)
    obs = Observation(np.full(20, 25.0), 60.0, 10, WorkloadSpec(capacity_per_replica=10.0))
    assert make_policy(name).plan(obs).max() == 3
    assert calls and calls[0]["capacity_per_replica"] == 10.0
