"""The pure estimators of measured cold start and capacity per replica."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.cold_start import (
    ABOVE_PER_CAPPED,
    check_capped,
    estimate_capacity,
    estimate_cold_start,
)
from forecaster.exceptions import DataValidationError


def test_cold_start_quantile_is_exact_on_known_samples() -> None:
    durations = np.arange(10, 110, 10, dtype=float)  # 10, 20, ..., 100 s
    created = 1_000.0 + np.arange(10) * 600
    estimate = estimate_cold_start("chat", created, created + durations[::-1], quantile=0.9)
    # Linear interpolation between order statistics: 90 + 0.1 * (100 - 90).
    assert estimate.seconds == 91.0
    assert estimate.measured
    assert estimate.summary == {"count": 10.0, "median": 55.0, "p90": 91.0, "max": 100.0}
    assert estimate_cold_start("chat", created, created + durations, quantile=0.5).seconds == 55.0
    assert "q0.9 of 10 starts" in estimate.describe()


def test_too_few_starts_fall_back_and_say_so() -> None:
    created = np.array([0.0, 100.0, 200.0, 300.0])
    estimate = estimate_cold_start("code", created, created + 400.0, min_starts=5, fallback=300.0)
    assert estimate.seconds == 300.0
    assert not estimate.measured
    assert estimate.summary["count"] == 4.0
    assert "falls back to 300 s" in estimate.describe()
    assert "fewer than the 5 needed" in estimate.describe()
    none = estimate_cold_start("code", np.array([]), np.array([]), fallback=120.0)
    assert none.seconds == 120.0 and "no starts" in none.describe()


def test_a_pod_ready_before_it_was_created_is_named() -> None:
    with pytest.raises(DataValidationError, match=r"workload 'chat': pod 1 has creation time"):
        estimate_cold_start("chat", np.array([0.0, 500.0]), np.array([60.0, 400.0]))


def queue_driven(capacity: float, seed: int, steps: int = 3000) -> tuple[np.ndarray, ...]:
    """Demand, ready replicas and a queue that grows exactly when demand > ready x capacity."""
    rng = np.random.default_rng(seed)
    demand = 50 + 30 * np.sin(np.arange(steps) / 200) + rng.normal(0, 3, steps)
    ready = np.ceil(demand / (capacity * rng.uniform(0.6, 1.25, steps)))
    queue = np.zeros(steps)
    for t in range(steps - 1):
        queue[t + 1] = max(0.0, queue[t] + (demand[t] - ready[t] * capacity) * 60)
    return demand, ready, queue


@pytest.mark.parametrize(("capacity", "seed"), [(5.0, 1), (2.0, 2), (12.5, 3)])
def test_capacity_is_the_load_at_which_the_queue_grows(capacity: float, seed: int) -> None:
    demand, ready, queue = queue_driven(capacity, seed)
    estimate = estimate_capacity("chat", demand, ready, queue)
    assert estimate.method == "queue growth"
    assert estimate.per_replica == pytest.approx(capacity, rel=0.01)
    assert 0 < estimate.growing < estimate.steps == len(demand) - 1


def test_capacity_without_a_queue_is_a_quantile_of_the_load() -> None:
    demand = np.array([10.0, 20.0, 30.0, np.nan, 40.0])
    ready = np.array([1.0, 2.0, 0.0, 1.0, 2.0])  # loads 10, 10, -, -, 20
    estimate = estimate_capacity("chat", demand, ready, quantile=0.5)
    assert (estimate.method, estimate.per_replica, estimate.steps) == ("load quantile", 10.0, 3)


def test_a_queue_that_never_grows_is_a_clear_error() -> None:
    demand, ready = np.full(10, 5.0), np.full(10, 2.0)
    with pytest.raises(DataValidationError, match=r"workload 'code': the queue grew in 0 of 9"):
        estimate_capacity("code", demand, ready, np.zeros(10))
    with pytest.raises(DataValidationError, match=r"workload 'code': no step has both"):
        estimate_capacity("code", demand, np.zeros(10))


def saturated_fleet(capacity: float, seed: int, steps: int = 3000) -> tuple[np.ndarray, ...]:
    """Arrivals, the ready replicas of a fleet that lags them, and the completions it served.

    The fleet is sized for the demand two hours earlier at 80 % utilization, so on every
    rising stretch the arrivals outrun it and the completions flatten at ready x capacity.
    """
    rng = np.random.default_rng(seed)
    arrivals = 50 + 30 * np.sin(np.arange(steps) / 200) + rng.normal(0, 3, steps)
    ready = np.ceil(np.roll(arrivals, 120) / (0.8 * capacity))
    completions = np.minimum(arrivals, ready * capacity)
    return arrivals, ready, completions


@pytest.mark.parametrize(("capacity", "seed"), [(5.0, 1), (2.0, 2)])
def test_completions_that_plateau_at_ready_times_capacity_are_capped(
    capacity: float, seed: int
) -> None:
    arrivals, ready, completions = saturated_fleet(capacity, seed)
    check = check_capped("chat", completions, ready, capacity)
    assert check.capped
    assert check.above == 0
    # The saturated steps sit on the ceiling, with those that came within 5 % of it.
    assert check.share == (arrivals >= 0.95 * ready * capacity).mean()
    assert check.share >= (arrivals > ready * capacity).mean() > 0.15
    assert check.plateau == pytest.approx(capacity, rel=0.01)
    assert "plateaus at ready replicas x capacity" in check.describe()
    assert f"{check.share:.1%} of 3000 steps" in check.describe()


@pytest.mark.parametrize(("capacity", "seed"), [(5.0, 1), (2.0, 2)])
def test_arrivals_of_the_same_saturated_fleet_are_not_capped(capacity: float, seed: int) -> None:
    arrivals, ready, _ = saturated_fleet(capacity, seed)
    check = check_capped("chat", arrivals, ready, capacity)
    assert (arrivals > ready * capacity * 1.05).mean() > 0.15  # the fleet was saturated
    assert not check.capped
    assert check.above > ABOVE_PER_CAPPED * check.at_ceiling
    assert "not capped" in check.describe()


def test_a_fleet_that_never_saturates_is_not_capped() -> None:
    rng = np.random.default_rng(4)
    demand = 40 + 10 * np.sin(np.arange(2000) / 150) + rng.normal(0, 2, 2000)
    ready = np.ceil(demand / (5.0 * 0.7))  # at most 70 % utilization
    check = check_capped("code", demand, ready, 5.0)
    assert (check.at_ceiling, check.above, check.capped) == (0, 0, False)
    assert np.isnan(check.plateau)


def test_the_capped_check_names_bad_input() -> None:
    with pytest.raises(DataValidationError, match=r"workload 'chat': capacity per replica .* -1"):
        check_capped("chat", np.ones(3), np.ones(3), -1.0)
    with pytest.raises(DataValidationError, match=r"lengths 3 and 2"):
        check_capped("chat", np.ones(3), np.ones(2), 1.0)
