"""The shadow replay's fleets on tiny hand-checked traces (1-minute cells, 15 s steps)."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.backtest.shadow import ASKS_COVERAGE, forecast_path, recorded_asks, replay
from forecaster.policies.base import Observation, QuantileForecast
from forecaster.workload import WorkloadPolicy, WorkloadSpec

STEP, PER_CELL = 60, 4  # 1-minute cells, 15 s simulation steps
CONTEXT = 2  # cells of history before the period


def policy(cold_start: float) -> WorkloadPolicy:
    spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=cold_start, target_utilization=1.0,
                        min_replicas=1, max_replicas=20, slo_latency_seconds=30.0)  # fmt: skip
    return WorkloadPolicy(spec, quantile=0.5)


def observation(
    demand: list[float], forecast: list[float], workload: WorkloadPolicy
) -> Observation:
    """The period's ``demand`` after ``CONTEXT`` cells of history; the forecast demand of
    origin ``k - 1`` (in force during period cell ``k``) is ``forecast[k]``."""
    first, last = workload.horizon_range(STEP)
    horizons = tuple(range(first, last + 1))
    per_origin = np.zeros(CONTEXT + len(demand))
    per_origin[CONTEXT - 1 : CONTEXT - 1 + len(forecast)] = forecast
    values = np.repeat(per_origin[:, None, None], len(horizons), axis=1)
    history = np.full(CONTEXT, demand[0])
    return Observation(
        np.concatenate([history, demand]), float(STEP), CONTEXT, workload.spec, sim_step=15.0,
        forecast=QuantileForecast(values, horizons, (0.5,)),
    )  # fmt: skip


def steps(cells: list[float]) -> np.ndarray:
    return np.repeat(np.asarray(cells), PER_CELL)


def test_asks_under_the_measured_fleet_leave_it_unchanged() -> None:
    workload = policy(0.0)
    obs = observation([1.0, 2.0, 2.0, 1.0], [1.0] * 4, workload)
    result = replay(obs, workload, steps([2, 2, 3, 2]))
    assert result.prewarm_metrics == result.actual_metrics
    assert result.actual_metrics.replica_hours == pytest.approx(9 / 60)
    assert result.actual_metrics.unserved_fraction == 0.0
    assert result.added_hours == 0.0
    assert result.asks_source == "replayed"


def test_a_spike_the_hpa_missed_is_served_by_capacity_asked_a_cold_start_earlier() -> None:
    # Demand jumps to 4 at cell 3; the HPA's replicas arrive one cell late, ready another
    # cell later. prewarm asked for 4 from cell 1, a minute (its cold start) ahead.
    workload = policy(60.0)
    obs = observation([1.0, 1.0, 1.0, 4.0, 4.0, 4.0], [1.0, 4.0, 4.0, 4.0, 4.0, 4.0], workload)
    result = replay(obs, workload, steps([1, 1, 1, 1, 4, 4]), steps([1, 1, 1, 1, 1, 4]))
    assert result.asks.tolist() == steps([1, 4, 4, 4, 4, 4]).tolist()
    assert result.actual_metrics.unserved_fraction > 0
    assert result.prewarm_metrics.unserved_fraction == 0.0
    # the actual fleet dropped work in cells 3 and 4 (after the 30 s deadline of cell 3)
    # while the hybrid fleet's 4 replicas were ready
    assert result.added_hours == pytest.approx(np.count_nonzero(result.actual.unserved) * 15 / 3600)
    assert result.added_hours > 0
    assert result.measured


def test_idle_hours_count_replicas_prewarm_did_not_ask_for_and_the_demand_did_not_need() -> None:
    workload = policy(0.0)
    result = replay(observation([1.0, 1.0], [1.0, 1.0], workload), workload, steps([3, 3]))
    assert result.idle_hours == pytest.approx(2 / 60)
    assert result.prewarm_metrics.replica_hours == result.actual_metrics.replica_hours


def test_an_ask_is_kept_for_the_hpa_scale_down_window() -> None:
    workload = policy(0.0)
    obs = observation([1.0] * 7, [5.0] + [1.0] * 6, workload)
    kept = forecast_path(obs, workload, (np.array([5.0] + [1.0] * 27), 1.0))
    # a recommendation made 300 s ago is outside Kubernetes' scale-down window
    assert kept[:20].tolist() == [5] * 20
    assert kept[20:].tolist() == [1] * 8


def test_the_replicas_the_cluster_ran_are_not_held_for_the_window_a_second_time() -> None:
    # The HPA's own scale-down of cell 2 already went through its stabilization window:
    # the hybrid fleet follows it at once when prewarm asks for less.
    workload = policy(0.0)
    obs = observation([1.0] * 4, [1.0] * 4, workload)
    result = replay(obs, workload, steps([5, 5, 1, 1]))
    assert result.prewarm.asked.tolist() == steps([5, 5, 1, 1]).tolist()


def test_the_recorded_forecast_demand_gives_the_fleet_the_replay_gives() -> None:
    # serve --shadow exports the metric the HPA reads: recorded as it was served, it builds
    # the same hybrid fleet as the replay of the same forecasts (here 10, then 8.5: outside
    # the 10 % tolerance, the HPA settles at 9).
    workload = policy(0.0)
    forecast = [10.0] * 2 + [8.5] * 10
    obs = observation([1.0] * 12, forecast, workload)
    replayed = replay(obs, workload)
    recorded = replay(obs, workload, asks=steps([10.0] * 2 + [8.5] * 10).astype(float))
    assert (replayed.asks_source, recorded.asks_source) == ("replayed", "recorded")
    assert replayed.asks.tolist() == recorded.asks.tolist()
    assert replayed.prewarm.asked.tolist() == recorded.prewarm.asked.tolist()
    assert recorded.prewarm.asked[-1] == 9
    # A recorded series that differs from the replay is what the fleet follows.
    higher = replay(obs, workload, asks=steps([10.0] * 12).astype(float))
    assert higher.prewarm.asked[-1] == 10


def test_recorded_asks_are_used_from_the_coverage_on_gaps_filled_by_the_replay() -> None:
    replayed = np.full(100, 3)
    recorded = np.full(100, 7.0)
    missing = round(100 * (1 - ASKS_COVERAGE))
    recorded[:missing] = np.nan
    used, share = recorded_asks(recorded, replayed)
    assert share == pytest.approx(ASKS_COVERAGE)
    assert used is not None
    assert used.tolist() == [3] * missing + [7] * (100 - missing)
    recorded[missing] = np.nan  # one step short of the coverage
    assert recorded_asks(recorded, replayed) == (None, pytest.approx(ASKS_COVERAGE - 0.01))
    assert recorded_asks(None, replayed) == (None, 0.0)


def test_fleets_of_the_wrong_length_are_refused_naming_them() -> None:
    from forecaster.exceptions import DataValidationError

    workload = policy(0.0)
    obs = observation([1.0, 1.0], [1.0, 1.0], workload)
    with pytest.raises(DataValidationError, match=r"\(8\), got \{'replicas': 7\}"):
        replay(obs, workload, np.ones(7))


def test_a_negative_recorded_ask_is_refused_naming_its_step() -> None:
    from forecaster.exceptions import DataValidationError

    recorded = np.array([2.0, np.nan, -1.0, 2.0])
    with pytest.raises(DataValidationError, match=r"got -1\.0 at simulation step 2"):
        recorded_asks(recorded, np.full(4, 2))
