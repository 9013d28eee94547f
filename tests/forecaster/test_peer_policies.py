"""The peers behave as their sources define: Crane predicts nothing without a daily or weekly
period and is then the plain HPA; Dynamo plans each interval for the next interval's load;
AWS sets capacity at hour boundaries a scheduling buffer early; keda-cron's floor is the
learned hour-of-week schedule. The no-look-ahead contract of every registered policy, the
peers included, is tests/policies/test_contract.py."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.policies import PEER_POLICIES, Observation, make_policy, policy_class
from forecaster.policies.aws_predictive import AWSPredictivePolicy
from forecaster.policies.crane_dsp import CraneDSPPolicy
from forecaster.policies.dynamo_planner import DynamoPlannerPolicy
from forecaster.policies.hpa import DEFAULT_SCALE_DOWN, HPABehavior, ScalingRules
from forecaster.policies.keda_cron import KedaCronPolicy
from forecaster.policies.reactive import ReactivePolicy
from forecaster.workload import WorkloadSpec

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
STEP = 300.0
SPEC = WorkloadSpec(capacity_per_replica=10.0, cold_start=300, max_replicas=60)
# No scale-down stabilization: a floor that falls shows at once, so its timing is visible.
PROMPT = HPABehavior(scale_down=ScalingRules(0, DEFAULT_SCALE_DOWN.policies))


def cells(days: float) -> int:
    return round(days * DAY / STEP)


def observation(demand: np.ndarray, start: int, spec: WorkloadSpec = SPEC) -> Observation:
    return Observation(demand, STEP, start, spec, train_window=start, retrain_every=cells(7))


def daily(days: float, noise: float, seed: int = 0) -> np.ndarray:
    t = np.arange(cells(days)) * STEP
    rng = np.random.default_rng(seed)
    return 100 + 80 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, noise, len(t))


# prewarm's own tuned policies: a peer's budget of settings lies within theirs.
OWN = ("static", "reactive", "seasonal-naive", "predictive", "buffered", "hybrid")


@pytest.mark.parametrize("name", PEER_POLICIES)
def test_each_peer_is_tuned_at_the_resolution_of_the_others(name: str) -> None:
    grid = policy_class(name).sweep_grid(SPEC)
    own = [len(policy_class(n).sweep_grid(SPEC)) for n in OWN]
    assert min(own) <= len(grid) <= max(own), (len(grid), own)
    assert len({tuple(sorted(p.items())) for p in grid}) == len(grid)
    knob = policy_class(name).knob
    assert knob is not None and len({p[knob] for p in grid}) >= 10


def test_crane_predicts_nothing_without_a_period_and_is_the_plain_hpa() -> None:
    rng = np.random.default_rng(3)
    walk = np.abs(200 + np.cumsum(rng.normal(0, 3, cells(17))))
    obs = observation(walk, cells(15))
    crane = CraneDSPPolicy(margin=0.3, target_utilization=0.9, tolerance=0.0)
    assert all(cycle is None for _, cycle in crane.updates(obs))
    hpa = ReactivePolicy(target_utilization=0.9, tolerance=0.0)
    np.testing.assert_array_equal(crane.plan(obs), hpa.plan(obs))


def test_crane_predicts_a_daily_series_by_repeating_its_cycle() -> None:
    demand = daily(17, noise=2.0)
    obs = observation(demand, cells(15))
    crane = CraneDSPPolicy(target_utilization=0.9, tolerance=0.0)
    updates = crane.updates(obs)
    assert all(cycle is not None and len(cycle) in (cells(1), cells(7)) for _, cycle in updates)
    # the metric is the largest prediction of the next hour: close to the true next-hour max
    ticks = crane.ticks(obs)
    ahead = np.floor(ticks / STEP).astype(int)[:, None] + np.arange(13)[None, :]
    clean = 100 + 80 * np.sin(2 * np.pi * ahead * STEP / DAY)
    np.testing.assert_allclose(crane.metric_at(obs, ticks), clean.max(axis=1), atol=12.0)
    # and it adds capacity the plain HPA does not have ahead of each rise
    hpa = ReactivePolicy(target_utilization=0.9, tolerance=0.0).plan(obs)
    assert crane.plan(obs).sum() > hpa.sum()


def test_dynamo_plans_each_interval_for_the_next_intervals_load() -> None:
    # a steady climb: each 180 s interval carries 12 more than the one before
    t = np.arange(cells(3)) * STEP
    rng = np.random.default_rng(1)
    demand = 20 + t / 15 + rng.normal(0, 1.0, len(t))
    obs = observation(demand, cells(2), WorkloadSpec(capacity_per_replica=10.0, max_replicas=999))
    planner = DynamoPlannerPolicy(target_utilization=1.0)
    ticks = obs.step_times(planner.interval)[:-2]
    predicted = planner.predicted(obs)[: len(ticks)]
    current = obs.mean_rate(ticks, planner.interval)
    following = obs.mean_rate(ticks + planner.interval, planner.interval)
    after_that = obs.mean_rate(ticks + 2 * planner.interval, planner.interval)
    error = np.abs(predicted - following).mean()
    assert error < 3.0  # a quarter of one interval's climb
    assert np.abs(predicted - current).mean() > 9.0
    assert np.abs(predicted - after_that).mean() > 9.0
    # the replicas for that prediction hold from the adjustment to the next one
    plan = planner.plan(obs)
    per_interval = round(planner.interval / obs.sim_step)
    sized = obs.replicas_for(predicted, 1.0)
    np.testing.assert_array_equal(plan[: len(ticks) * per_interval : per_interval], sized)
    assert (np.ptp(plan[: per_interval * len(ticks)].reshape(-1, per_interval), axis=1) == 0).all()


def hourly_history(days: int) -> tuple[np.ndarray, np.ndarray]:
    """Demand that repeats the same hour-of-day levels for ``days``, then one day of none."""
    levels = np.random.default_rng(2).uniform(20.0, 300.0, 24)
    hour_of = (np.arange(cells(days + 1)) * STEP // HOUR).astype(int)
    demand = levels[hour_of % 24]
    demand[cells(days) :] = 0.0
    return demand, levels


def test_aws_sets_the_hours_capacity_a_scheduling_buffer_before_the_hour() -> None:
    demand, levels = hourly_history(14)
    obs = observation(demand, cells(14))
    aws = AWSPredictivePolicy(
        forecast_utilization=1.0, buffer=300.0, behavior=PROMPT, tolerance=0.0
    )
    # the scheduled minimum: the forecast of hour H from H * 3600 - 300 s on
    times = obs.start * STEP + np.arange(0, 20 * HOUR, 60.0)
    hour = np.floor((times + 300.0) / HOUR).astype(int)
    expected = obs.replicas_for(levels[hour % 24], 1.0)
    np.testing.assert_array_equal(aws.floor_at(obs, times), expected)
    # with no demand, target tracking asks for nothing and the plan is the minimum alone
    plan = aws.plan(obs)
    clock = obs.step_times()
    changes = clock[1:][np.diff(plan) != 0]
    # past the first minute, where the HPA leaves the history's demand behind
    changes = changes[changes > clock[0] + 60.0]
    offset = (changes + 300.0) % HOUR
    # every change happens in the first minute after an hour's action (rate limits aside)
    assert len(changes) > 10 and (offset < 60.0).all()
    before = clock[(clock + 300.0) % HOUR == HOUR - 15.0][:20]  # the step before an action
    hour_before = np.floor((before + 300.0) / HOUR).astype(int)
    np.testing.assert_array_equal(
        plan[np.searchsorted(clock, before)], obs.replicas_for(levels[hour_before % 24], 1.0)
    )


def test_aws_forecasts_nothing_with_less_than_a_day_of_history() -> None:
    demand, _ = hourly_history(14)
    obs = observation(demand[cells(13.5) :], cells(0.5))
    aws = AWSPredictivePolicy(behavior=PROMPT)
    assert not aws.floor_at(obs, aws.ticks(obs)[: round(HOUR / 15)]).any()


def test_keda_cron_floor_is_the_learned_hour_of_week_schedule() -> None:
    rng = np.random.default_rng(4)
    history = rng.gamma(2.0, 60.0, cells(14))
    demand = np.concatenate([history, np.zeros(cells(1))])
    obs = observation(demand, cells(14))
    cron = KedaCronPolicy(quantile=0.95, behavior=PROMPT, tolerance=0.0)
    hour_of_week = (np.arange(cells(14)) * STEP // HOUR).astype(int) % 168
    schedule = np.array([np.quantile(history[hour_of_week == h], 0.95) for h in range(168)])
    times = obs.step_times()
    slot = (times // HOUR).astype(int) % 168
    wanted = obs.replicas_for(schedule[slot], SPEC.target_utilization)
    np.testing.assert_array_equal(cron.floor_at(obs, times), wanted)
    # with no demand the HPA holds the floor: settled by the end of each hour
    plan = cron.plan(obs)
    last_of_hour = (times + obs.sim_step) % HOUR == 0
    np.testing.assert_array_equal(plan[last_of_hour], wanted[last_of_hour])


def test_keda_cron_relearns_the_schedule_at_each_retrain() -> None:
    # the second week of evaluation sees the first week of it in its training window
    low, high = np.full(cells(14), 50.0), np.full(cells(14), 400.0)
    obs = observation(np.concatenate([low, high]), cells(14))
    cron = KedaCronPolicy(quantile=0.5, behavior=PROMPT)
    starts, learned = cron.schedule(obs)
    assert starts.tolist() == [cells(14), cells(21)]
    np.testing.assert_allclose(learned[0], 50.0)
    # each slot of the second window holds one week at 50 and one at 400
    np.testing.assert_allclose(learned[1], 225.0)


@pytest.mark.parametrize("name", PEER_POLICIES)
def test_no_peer_reads_the_future_of_a_periodic_trace(name: str) -> None:
    # the contract suite's traces are too short and noisy for the forecast paths to engage
    # fully; here every peer forecasts (Crane finds the day), and the future is then replaced
    demand = daily(17, noise=2.0)
    obs = observation(demand, cells(15))
    cut = cells(15.7)
    corrupted = demand.copy()
    corrupted[cut:] *= 3.0
    policy = make_policy(name)
    plan, other = policy.plan(obs), policy.plan(observation(corrupted, cells(15)))
    before = obs.step_times() < cut * STEP
    np.testing.assert_array_equal(plan[before], other[before])
    assert (plan[~before] != other[~before]).any()
