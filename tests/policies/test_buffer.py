"""The warm buffer: learned leakage-free, per hour where the data allows, served as backtested."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest.run import seconds_of_day
from forecaster.buffer import (
    HOURS,
    buffer_rate,
    fit_buffer,
    hour_of_day,
    learn_buffer,
    learned,
    relative_increase,
)
from forecaster.capacity import plan_capacity
from forecaster.exceptions import ConfigError, NotEnoughHistoryError, PlanError
from forecaster.models.baseline import LastValue
from forecaster.policies import Observation, QuantileForecast, make_policy, policy_class
from forecaster.policies.autoscaler import hybrid_policy
from forecaster.policies.buffered import buffer_path, walk_forward_buffer
from forecaster.workload import WorkloadPolicy, WorkloadSpec

STEP = 60
DAY_CELLS = 86400 // STEP
START = pd.Timestamp("2026-03-02 00:00", tz="UTC")
SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=120, max_replicas=200)


def bursty(days: int = 4, seed: int = 0, burst_hour: int = 14) -> np.ndarray:
    """A steady 50 with bursts of +200 at ``burst_hour`` every day and small noise."""
    rng = np.random.default_rng(seed)
    values = 50 + rng.normal(0, 2, days * DAY_CELLS)
    hours = hour_of_day(np.arange(len(values)), STEP, 0.0)
    values[(hours == burst_hour) & (np.arange(len(values)) % 20 < 3)] += 200
    return np.clip(values, 0, None)


def observation(values: np.ndarray, start: int, every: int) -> Observation:
    return Observation(values, float(STEP), start, SPEC, train_window=start, retrain_every=every)


def test_the_buffer_of_each_period_is_learned_only_from_before_it() -> None:
    values = bursty()
    start, every = 2 * DAY_CELLS, DAY_CELLS // 2
    obs = observation(values, start, every)
    first, last = obs.lead_horizons(0.0)
    learned_then = walk_forward_buffer(obs, 0.95, 0.0)
    hours = hour_of_day(np.arange(len(values)), STEP, 0.0)
    for s in range(start, len(values), every):
        ratios, level = fit_buffer(values[s - start : s], hours[s - start : s], first, last, 0.95)
        served = np.arange(s - 1, min(s + every - 1, len(values)))
        np.testing.assert_array_equal(learned_then[served, 0], np.asarray(ratios)[hours[served]])
        np.testing.assert_array_equal(learned_then[served, 1], level)
        # corrupting everything from s on leaves the buffer served from s - 1 unchanged
        corrupted = values.copy()
        corrupted[s:] = 1e6
        again = walk_forward_buffer(observation(corrupted, start, every), 0.95, 0.0)
        np.testing.assert_array_equal(again[served[:1]], learned_then[served[:1]])


def test_the_burst_hour_gets_its_own_buffer_and_a_short_window_pools() -> None:
    values = bursty(days=3)
    hours = hour_of_day(np.arange(len(values)), STEP, 0.0)
    ratios, level = fit_buffer(values, hours, 3, 3, 0.9)
    assert level == pytest.approx(values.mean())
    assert ratios[14] > 2.0 > 5 * max(r for h, r in enumerate(ratios) if h not in (13, 14))
    # Two hours of history hold fewer increases per hour than q = 0.99 needs: one pooled value.
    pooled, _ = fit_buffer(values[: 2 * 60 + 10], hours[: 2 * 60 + 10], 3, 3, 0.99)
    assert len(set(pooled)) == 1


def test_increases_are_relative_to_the_demand_or_the_level_never_to_zero() -> None:
    values = np.array([0.0, 0.0, 5.0, 40.0, 40.0, 80.0])
    ratios = relative_increase(values, 1, 1, 10.0)
    # from an idle origin the increase is measured against the level, from a busy one
    # against its own demand
    np.testing.assert_allclose(ratios[:5], [0.0, 0.5, 3.5, 0.0, 1.0])
    with pytest.raises(ConfigError, match="level"):
        relative_increase(values, 1, 1, 0.0)
    np.testing.assert_allclose(buffer_rate(np.array([0.0, 40.0]), 0.5, 10.0), [5.0, 60.0])


def test_too_little_history_is_refused_with_the_count() -> None:
    with pytest.raises(NotEnoughHistoryError, match=r"at least 60 observed increases.*got 10"):
        learn_buffer(np.ones(10), np.zeros(10, dtype=int), 0.9)


def test_a_learned_policy_round_trips_and_bad_buffers_are_refused() -> None:
    values = bursty(days=2)
    policy = learned(WorkloadPolicy(SPEC, buffer_quantile=0.95), values, STEP, 0.0)
    assert len(policy.buffer) == HOURS and policy.buffer_level > 0
    assert WorkloadPolicy.from_dict(policy.to_dict()) == policy
    assert policy.settings()["buffer_quantile"] == 0.95
    # no buffer: nothing learned
    assert learned(WorkloadPolicy(SPEC), values, STEP, 0.0) == WorkloadPolicy(SPEC)
    with pytest.raises(ConfigError, match="buffer_quantile"):
        WorkloadPolicy(SPEC, buffer_quantile=1.0)
    with pytest.raises(ConfigError, match="24 finite ratios"):
        WorkloadPolicy(SPEC, buffer_quantile=0.9, buffer=(1.0,) * 23, buffer_level=1.0)
    with pytest.raises(ConfigError, match="buffer_level"):
        WorkloadPolicy(SPEC, buffer_quantile=0.9, buffer=(1.0,) * 24)


def history_frame(values: np.ndarray, name: str = "chat") -> pd.DataFrame:
    times = pd.date_range(START, periods=len(values), freq=f"{STEP}s")
    return pd.DataFrame({"series": name, "timestamp": times, "value": values})


def test_serving_publishes_the_buffer_the_backtest_plans_with() -> None:
    values = bursty(days=3)
    # The last origin falls in the burst hour: the buffer, not the forecast, sets the ask.
    values = values[: 2 * DAY_CELLS + 14 * 60 + 30]
    history = history_frame(values)
    policy = learned(
        WorkloadPolicy(SPEC, quantile=0.9, buffer_quantile=0.95),
        values[-DAY_CELLS:],
        STEP,
        seconds_of_day(history["timestamp"].iloc[-DAY_CELLS]),
    )
    first, last = policy.horizon_range(STEP)
    model = LastValue(horizons=range(first, last + 1), quantiles=[0.5, 0.9], scale_window="30m")
    model.fit(history)
    served = plan_capacity(model, history, {"chat": policy}).set_index("series")
    # The backtest's hybrid for this policy, asked at the moment the last origin is known.
    obs = Observation(values, float(STEP), len(values) - 10, SPEC, day_offset=seconds_of_day(START))
    hybrid = hybrid_policy(policy)
    asked = buffer_path(obs, np.array([len(values) * STEP]), 0.95, 0.0, hybrid.buffer)
    forecast = model.predict(history)["q0.9"].max()
    assert asked[0] > forecast  # the buffer is what the plan asks for here
    assert served.loc["chat", "forecast_demand"] == pytest.approx(asked[0])
    assert served.loc["chat", "buffer_demand"] == pytest.approx(asked[0])
    ratio = policy.buffer[14]
    assert asked[0] == pytest.approx(values[-1] + ratio * max(values[-1], policy.buffer_level))


def test_serving_refuses_a_buffer_policy_that_was_never_learned() -> None:
    values = bursty(days=2)
    history = history_frame(values)
    policy = WorkloadPolicy(SPEC, quantile=0.9, buffer_quantile=0.9)
    first, last = policy.horizon_range(STEP)
    model = LastValue(horizons=range(first, last + 1), quantiles=[0.5, 0.9]).fit(history)
    with pytest.raises(PlanError, match=r"'chat'.*no learned `buffer`"):
        plan_capacity(model, history, {"chat": policy})


def test_the_buffer_lets_hybrid_cover_a_burst_the_forecast_does_not_see() -> None:
    values = bursty(days=4)
    start = 3 * DAY_CELLS
    # A forecast that only knows the calm level: it cannot see the daily burst.
    lead, _ = WorkloadPolicy(SPEC).horizon_range(STEP)
    calm = np.full((len(values), 1, 1), 52.0)
    obs = Observation(
        values,
        float(STEP),
        start,
        SPEC,
        train_window=start,
        retrain_every=DAY_CELLS,
        forecast=QuantileForecast(calm, (lead,), (0.9,)),
    )
    plain = make_policy("hybrid", quantile=0.9, target_utilization=1.0, forecast_utilization=1.0)
    buffered = make_policy(
        "hybrid",
        quantile=0.9,
        target_utilization=1.0,
        forecast_utilization=1.0,
        buffer_quantile=0.99,
    )
    burst = hour_of_day(np.arange(len(values)), STEP, 0.0)[start:] == 14
    at = np.repeat(burst, STEP // 15)[: obs.n_steps]
    capacity = SPEC.capacity_per_replica
    need = np.repeat(values[start:], STEP // 15)[: obs.n_steps] / capacity
    # in the burst hour the buffered plan keeps enough replicas for the bursts, the plain
    # one does not
    assert (buffered.plan(obs)[at] >= need[at]).mean() > 0.95
    assert (plain.plan(obs)[at] >= need[at]).mean() < 0.9


def test_every_hybrid_setting_names_its_buffer_so_tuning_can_turn_one_off() -> None:
    configured = WorkloadPolicy(SPEC, buffer_quantile=0.99)
    grid = policy_class("hybrid").sweep_grid(SPEC)
    assert all("buffer_quantile" in point for point in grid)
    plain = next(p for p in grid if p["buffer_quantile"] == 0)
    assert configured.tuned(**plain).buffer_quantile == 0.0
