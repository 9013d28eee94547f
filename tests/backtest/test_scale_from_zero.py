"""Scale from zero as KEDA does it: activation polled every ``pollingInterval`` (or pushed),
scale to 0 after ``cooldownPeriod`` without activity, the HPA only from 1 replica up."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.activation import KedaActivation, activation_quantile, awake_replicas
from forecaster.backtest.simulator import simulate
from forecaster.exceptions import ConfigError
from forecaster.policies import Observation, QuantileForecast, make_policy
from forecaster.workload import WorkloadSpec

STEP = 15.0  # data, simulation and HPA sync step
COLD_START = 120.0
SPEC = WorkloadSpec(
    capacity_per_replica=10.0,
    cold_start=COLD_START,
    target_utilization=1.0,
    min_replicas=0,
    slo_latency_seconds=30,
)
START = 20  # the evaluation starts at 300 s, after 20 cells of an idle history
FIRST_REQUEST = 615.0  # 15 s after a polling tick: the demand starts between two polls
# Prometheus scrapes at 15 s past each polling tick: the scrape at 645 s is the first to see
# the demand, the HPA's sync at 645 s could, and KEDA's poll at 660 s is the first that does.
SCRAPE_PHASE = 15.0
LAST_REQUEST = 1200.0
RATE = 5.0


def _demand() -> np.ndarray:
    cells = np.arange(200) * STEP
    return np.where((cells >= FIRST_REQUEST) & (cells < LAST_REQUEST), RATE, 0.0)


def _run(policy: str, **params: object) -> tuple[np.ndarray, np.ndarray, object]:
    demand = _demand()
    horizon = 1 + int(COLD_START // STEP)  # the one horizon of the lead window [L, L]
    # A perfect forecast: origin j's forecast of cell j + horizon is that cell's demand.
    ahead = np.concatenate([demand[horizon:], np.zeros(horizon)])
    forecast = QuantileForecast(ahead[:, None, None], (horizon,), (0.95,))
    obs = Observation(demand, STEP, START, SPEC, sim_step=STEP, forecast=forecast)
    desired = make_policy(policy, scrape_phase=SCRAPE_PHASE, **params).plan(obs)
    times = obs.step_times()
    return times, desired, simulate(obs.sim_rate, desired, SPEC, step_seconds=STEP)


def test_keda_polls_activation_and_scales_to_zero_after_the_cooldown() -> None:
    times = np.arange(0, 1500, STEP)
    active = (times >= 645) & (times <= 700)  # turns active between two polls
    keda = KedaActivation()
    polled = keda.awake(times, active)
    pushed = keda.awake(times, np.zeros_like(active), active)
    # a poll at every 30 s: the first one to see the activity is at 660
    assert times[polled][0] == 660
    # a push is acted on at once
    assert times[pushed][0] == 645
    # the last poll that saw it active is at 690; at 990 the cooldown is exactly over, which
    # is not yet "before now": 0 replicas from the poll at 1020
    for awake in (polled, pushed):
        assert times[awake][-1] == 1005
    assert not KedaActivation(cooldown_period=600).awake(times, active)[-1]  # still up


def test_polling_must_be_whole_ticks() -> None:
    with pytest.raises(ConfigError, match="whole number of controller ticks"):
        KedaActivation(polling_interval=20).awake(np.arange(0, 60, STEP), np.ones(4, bool))


def test_the_hpa_runs_only_while_awake_and_restarts_from_one_replica() -> None:
    awake = np.array([True, True, False, False, True, True, True])
    calls: list[tuple[int, int, int]] = []

    def run(begin: int, end: int, initial: int) -> np.ndarray:
        calls.append((begin, end, initial))
        return np.full(end - begin, 7)

    assert awake_replicas(awake, run, 3).tolist() == [7, 7, 0, 0, 1, 7, 7]
    assert calls == [(0, 2, 3), (5, 7, 1)]


def test_reactive_wakes_at_the_next_poll_and_is_ready_a_cold_start_later() -> None:
    times, desired, run = _run("reactive", target_utilization=1.0)
    # Prometheus' scrape at 645 is the first to see the demand of 615; KEDA's next poll, at
    # 660, reads it and scales to 1; the replica serves from 660 + the cold start.
    woken = times[desired > 0][0]
    assert woken == 660
    assert times[run.ready > 0][0] == woken + COLD_START
    assert (desired[times < woken] == 0).all()
    # Work that waited past the 30 s latency before the replica was ready is lost:
    # everything that arrived in [615, 780 - 30).
    lost = RATE * (woken + COLD_START - SPEC.slo_latency_seconds - FIRST_REQUEST)
    assert run.unserved.sum() == pytest.approx(lost)
    # The last poll to see the demand is at 1230 (the scrape at 1215 covers its last 15 s);
    # the first poll more than 300 s later is at 1560: 0 replicas from then on.
    assert times[desired > 0][-1] == 1545
    assert (desired[times >= 1560] == 0).all()


def test_hybrid_with_forecast_activation_is_ready_before_the_first_request() -> None:
    times, desired, run = _run(
        "hybrid",
        quantile=0.95,
        activation_probability=0.05,
        target_utilization=1.0,
        forecast_utilization=1.0,
    )
    assert activation_quantile(0.05) == 0.95  # the quantile the forecast carries
    # The forecast issued at origin 32 (known at 495 s) sees the demand of 615, one cold
    # start ahead: the push wakes the workload at once, and it is ready at the request.
    woken = times[desired > 0][0]
    assert woken == FIRST_REQUEST - COLD_START
    assert times[run.ready > 0][0] <= FIRST_REQUEST
    assert run.unserved.sum() == pytest.approx(0.0, abs=1e-9)
    assert (desired[times >= 1560] == 0).all()  # the reactive trigger's cooldown ends it


def test_min_one_replica_keeps_keda_out_of_it() -> None:
    demand = _demand()
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=COLD_START, min_replicas=1)
    obs = Observation(demand, STEP, START, spec, sim_step=STEP)
    desired = make_policy("reactive", target_utilization=1.0).plan(obs)
    assert desired.min() == 1


def test_a_keda_cron_window_wakes_the_workload_at_the_poll_that_opens_it() -> None:
    # One week of history with demand every day from 09:00 to 10:00; in the scored day it
    # comes ten minutes late. The learned cron window for 09:00 opens on time.
    cells = np.arange(8 * 1440) * 60.0
    hour = (cells % 86400) / 3600
    scored = 7 * 1440
    demand = np.where((hour >= 9) & (hour < 10), RATE, 0.0)
    demand[(cells >= scored * 60) & (hour < 9 + 10 / 60)] = 0.0
    obs = Observation(demand, 60.0, scored, SPEC, sim_step=STEP, train_window=scored)
    times = obs.step_times()
    cron = make_policy("keda-cron", quantile=0.5, target_utilization=1.0).plan(obs)
    assert times[cron > 0][0] == scored * 60 + 9 * 3600
    reactive = make_policy("reactive", target_utilization=1.0).plan(obs)
    assert times[reactive > 0][0] > scored * 60 + 9 * 3600 + 600  # only after the demand
