"""Golden scenario: a ten-point trace where every number is worked out by hand below.

Data step 60 s, simulation step 15 s (4 steps per data point), capacity 10 per replica,
utilization 1, cold start 30 s (2 steps), SLO latency 15 s (work not served within 15 s of
its arrival is unserved), 1 per replica-hour. History is data 0..3, evaluation data 4..9:

    data      0   1   2   3 | 4   5   6   7   8   9
    demand   10  10  30  10 |10  10  30  30  10  10
    sim steps               0-3 4-7 8-11 12-15 16-19 20-23

Arrivals: 16 steps x 10 x 15 + 8 steps x 30 x 15 = 2400 + 3600 = 6000.
"""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.backtest.metrics import compute_metrics
from forecaster.backtest.simulator import simulate
from forecaster.policies import Observation, QuantileForecast, make_policy
from forecaster.workload import WorkloadSpec

DEMAND = np.array([10, 10, 30, 10, 10, 10, 30, 30, 10, 10], dtype=float)
STEP_HOURS = 15 / 3600
ARRIVALS = 6000.0
SPEC = WorkloadSpec(
    capacity_per_replica=10.0,
    cold_start=30,
    target_utilization=1.0,
    min_replicas=1,
    max_replicas=10,
    replica_hour_cost=1.0,
    slo_latency_seconds=15,
    quantile=0.9,
)


def perfect_forecast() -> QuantileForecast:
    # lead 30 s on 60 s data -> horizons 1..2; origin j forecasts demand[j + 1], demand[j + 2]
    # (a value of 10 stands in past the end of the trace)
    padded = np.concatenate([DEMAND, [10.0, 10.0]])
    values = np.stack([padded[1:11], padded[2:12]], axis=1)[:, :, None]
    return QuantileForecast(values, horizons=(1, 2), quantiles=(0.9,))


OBS = Observation(DEMAND, 60.0, 4, SPEC, sim_step=15.0, forecast=perfect_forecast())
REACTIVE = {"scrape_interval": 15.0, "rate_window": 30.0}

# name, params, desired replicas per step, replica-steps billed, unserved work, cold starts
GOLDEN = [
    # peak of the history (30) / 10 -> 3 replicas throughout, warm from the start
    ("static", {}, [3] * 24, 24 * 3, 0.0, 0),
    # need 1,1 | 3,3 | 1,1 per data step; levels 2 and 3 busy at steps 8-15, asked 2 steps
    # early (step 6); level 1 always: 24 + 2 x 10 replica-steps
    ("oracle", {}, [1] * 6 + [3] * 10 + [1] * 8, 24 + 2 * 10, 0.0, 2),
    # Scrapes every 15 s at t = 0, 15, ...: rate([30s]) at tick k, t = 240 + 15k, spans the
    # samples at t - 15 and t, so the metric is the demand over [t - 15, t]: 30 from tick 9
    # to 16. Tick 9 proposes 3 (limit max(2, 5)); the 300 s window then holds 3 to the end.
    # The 2 new replicas are ready at step 11; steps 8-10 get 450 each against 150 (10 per
    # s against 30 per s). Step 8 queues 300; in step 9 the deadline (t - 15) sweeps step 8's
    # arrivals at 30 per s, catches the service halfway and 150 is lost; in step 10 service
    # stays at the deadline, 300 lost. From step 11, 450 against 450 serves the 15 s queue
    # just in time, and it drains from step 16: 150 + 300 lost.
    ("reactive", REACTIVE, [1] * 9 + [3] * 15, 9 * 1 + 15 * 3, 450.0, 2),
    # origin j = 3 + i // 4 forecasts max(demand[j+1], demand[j+2]): 10 | 30 30 30 | 10 10,
    # sized 1 | 3 3 3 | 1 1 per data step. A replica is released only when no answer of the
    # last cold start wants it (the demand of step i was sized by the answer of step i - 2,
    # 30 s earlier): steps 16 and 17 keep step 15's 3, so 3 from step 4 to 17 (14 steps);
    # 4 + 14 x 3 + 6 replica-steps.
    ("predictive", {}, [1] * 4 + [3] * 14 + [1] * 6, 4 + 14 * 3 + 6, 0.0, 2),
    # both metrics: the forecast asks 3 at tick 4, the 300 s window keeps 3 to the end
    ("hybrid", REACTIVE, [1] * 4 + [3] * 20, 4 + 20 * 3, 0.0, 2),
    # season 2 steps, level 1 step: origin j forecasts max(d[j-1], d[j]) * d[j] / d[j-2]:
    # j=3: 30, j=4: 10/3, j=5: 10, j=6: 90, j=7: 90, j=8: 10. Starts at 3 (30 / 10);
    # tick 12 proposes 9, limited to max(2 x 3, 3 + 4) = 7, then 9; held by the window.
    (
        "seasonal-naive",
        {"season": 120.0, "level_window": 60.0, **REACTIVE},
        [3] * 12 + [7] + [9] * 11,
        12 * 3 + 7 + 11 * 9,
        0.0,
        4 + 2,
    ),
]


@pytest.mark.parametrize(
    ("name", "params", "desired", "replica_steps", "unserved", "cold_starts"),
    GOLDEN,
    ids=[row[0] for row in GOLDEN],
)
def test_golden_scenario(
    name: str,
    params: dict[str, float],
    desired: list[int],
    replica_steps: int,
    unserved: float,
    cold_starts: int,
) -> None:
    plan = make_policy(name, **params).plan(OBS)
    assert plan.tolist() == desired
    metrics = compute_metrics(simulate(OBS.sim_rate, plan, SPEC, step_seconds=15.0), SPEC)
    assert metrics.replica_hours == pytest.approx(replica_steps * STEP_HOURS)
    assert metrics.cost == pytest.approx(replica_steps * STEP_HOURS * 1.0)
    assert metrics.unserved_fraction == pytest.approx(unserved / ARRIVALS)
    assert metrics.cold_starts == cold_starts


def test_golden_reactive_trajectory_details() -> None:
    plan = make_policy("reactive", **REACTIVE).plan(OBS)
    run = simulate(OBS.sim_rate, plan, SPEC, step_seconds=15.0)
    # asked at step 9, ready two steps later
    assert run.ready.tolist() == [1] * 11 + [3] * 13
    assert run.asked.tolist() == plan.tolist()
    assert run.arrivals.sum() == pytest.approx(ARRIVALS)
    assert run.unserved[8:11].tolist() == pytest.approx([0.0, 150.0, 300.0])
    assert run.backlog[10:17].tolist() == pytest.approx([450.0] * 6 + [150.0])
    metrics = compute_metrics(run, SPEC)
    # steps 8-11 are one whole minute (steps 8..11) with 450 of 1800 unserved
    assert metrics.slo_violation_minutes == pytest.approx(1.0)
    assert metrics.scale_events == 1
    # served 6000 - 450 of capacity (11 x 1 + 13 x 3) x 150
    assert metrics.mean_utilization == pytest.approx(5550 / ((11 + 39) * 150))
