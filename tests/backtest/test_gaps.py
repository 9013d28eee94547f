"""Long gaps in the data are simulated through but not scored; short ones are scored.

The trace: 1-minute data, 15 s simulation steps, an hour of history at 10 and two hours
evaluated at 10, with two holes filled at 40 by interpolation between 40s at their edges:

    cells      60 .. 68  69  70-72  73  74 .. 88  89  90 ... 149  150  151 .. 179
    demand        10     40   NaN   40     10     40     NaN       40      10

A replica serves 10, cold start 0, one per replica-hour. The oracle runs one replica
throughout and three more over each burst of 40: over cells 69-73 (20 steps) and 89-150
(248 steps). The evaluation is 480 steps, 0.5 replica-hour per 120 steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest.frontier import run_policy
from forecaster.backtest.metrics import compute_metrics
from forecaster.backtest.run import BacktestSettings, backtest, observe
from forecaster.backtest.simulator import simulate
from forecaster.exceptions import DataValidationError
from forecaster.policies import Observation
from forecaster.workload import WorkloadSpec
from prewarm import backtest_report

SPEC = WorkloadSpec(
    capacity_per_replica=10.0,
    cold_start=0,
    target_utilization=1.0,
    min_replicas=1,
    max_replicas=10,
    replica_hour_cost=1.0,
)
HOUR = 3600
STEP_HOURS = 15 / HOUR
START = 60  # first evaluated cell
LONG_GAP = (90, 150)


def trace() -> np.ndarray:
    values = np.full(180, 10.0)
    values[[69, 73, 89, 150]] = 40.0
    values[70:73] = np.nan  # 3 cells: interpolated and scored
    values[LONG_GAP[0] : LONG_GAP[1]] = np.nan  # 60 cells: simulated, not scored
    return values


def run(values: np.ndarray, **settings: int) -> tuple[Observation, dict[str, float]]:
    times = pd.date_range("2026-01-05", periods=len(values), freq="60s", tz="UTC")
    result = backtest(
        values,
        times,
        60,
        BacktestSettings(
            SPEC,
            policies=("static", "reactive", "oracle"),
            train_window=HOUR,
            retrain_every=HOUR,
            **settings,
        ),
    )
    hours = {name: point.metrics.replica_hours for name, (point, _) in result.headline.items()}
    return result.observation, hours


@pytest.mark.parametrize(
    ("settings", "oracle_steps"),
    [
        # level 1 on 240 scored steps; levels 2-4 on the short hole's 20 and on the 8 scored
        # steps of the long hole's edge cells 89 and 150
        pytest.param({}, 240 + 3 * (20 + 8), id="long-gap-excluded"),
        # a 60-cell gap is short enough at max_fill=60: all 480 steps, the whole bursts
        pytest.param({"max_fill": 60}, 480 + 3 * (20 + 248), id="max-fill-covers-it"),
    ],
)
def test_oracle_pays_only_for_scored_cells(settings: dict[str, int], oracle_steps: int) -> None:
    _, hours = run(trace(), **settings)
    assert hours["oracle"] == pytest.approx(oracle_steps * STEP_HOURS)


def test_every_policy_is_scored_outside_the_long_gap_only() -> None:
    obs, _ = run(trace())
    assert obs.excluded == (LONG_GAP,)
    # the steps of cells 90..149 of the evaluation, counted from its first cell
    gap = np.zeros(obs.n_steps, dtype=bool)
    gap[(LONG_GAP[0] - START) * 4 : (LONG_GAP[1] - START) * 4] = True
    np.testing.assert_array_equal(obs.scored, ~gap)
    for name in ("static", "reactive", "oracle"):
        trajectory, metrics = run_policy(obs, name, {}, seed=0)
        assert trajectory.asked[gap].sum() > 0  # the simulation ran through the gap
        assert metrics.replica_hours == pytest.approx(trajectory.asked[~gap].sum() * STEP_HOURS)
        lost, arrived = trajectory.unserved[~gap].sum(), trajectory.arrivals[~gap].sum()
        assert metrics.unserved_fraction == pytest.approx(lost / arrived)


def test_a_trace_with_nothing_scored_is_refused() -> None:
    values = trace()
    values[START:] = np.nan
    with pytest.raises(DataValidationError, match="max_fill"):
        run(values)


def test_excluded_steps_count_no_cost_loss_slo_minute_or_scale_event() -> None:
    # Capacity 150 per replica-step. Steps 4-7 bring 600 each to one replica: work is lost
    # through step 8; two replicas from step 9 clear the queue. The replica count moves at
    # steps 2, 4 and 9, replicas are launched at 2 and 9; steps 4..11 are excluded.
    rate = np.array([10.0] * 4 + [40.0] * 4 + [10.0] * 8)
    desired = np.array([1, 1, 2, 2, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2])
    spec = WorkloadSpec(capacity_per_replica=10.0, cold_start=0, slo_latency_seconds=15)
    trajectory = simulate(rate, desired, spec)
    scored = np.ones(16, dtype=bool)
    scored[4:12] = False
    everything = compute_metrics(trajectory, spec)
    assert everything.unserved_fraction > 0 and everything.slo_violation_minutes == 2.0
    metrics = compute_metrics(trajectory, spec, scored)
    assert metrics.replica_hours == pytest.approx((1 + 1 + 2 + 2 + 4 * 2) * STEP_HOURS)
    assert metrics.unserved_fraction == 0.0
    assert metrics.slo_violation_minutes == 0.0
    assert metrics.scale_events == 1  # the change at step 9 is excluded
    assert metrics.cold_starts == 1
    assert metrics.mean_utilization == pytest.approx((8 * 150) / ((1 + 1 + 2 + 2 + 4 * 2) * 150))


def test_the_report_states_the_excluded_span() -> None:
    times = pd.date_range("2026-01-05", periods=180, freq="60s", tz="UTC")
    settings = BacktestSettings(
        SPEC, policies=("static", "oracle"), train_window=HOUR, retrain_every=HOUR
    )
    result = backtest(trace(), times, 60, settings)
    document = backtest_report.to_json(result, {"path": "trace.csv"})
    assert document["evaluation"]["excluded"] == {
        "cells": 60,
        "seconds": 3600.0,
        "gaps": 1,
        "intervals": [["2026-01-05T01:30:00+00:00", "2026-01-05T02:30:00+00:00"]],
    }
    assert "not scored: 1h (60 cells) in 1 gap(s)" in backtest_report.markdown(document)


def test_the_report_bounds_the_intervals_it_lists() -> None:
    values = np.full(600, 10.0)
    for begin in range(100, 600, 20):  # 25 gaps of 5 cells
        values[begin : begin + 5] = np.nan
    times = pd.date_range("2026-01-05", periods=600, freq="60s", tz="UTC")
    settings = BacktestSettings(SPEC, policies=("oracle",), train_window=HOUR, retrain_every=HOUR)
    document = backtest_report.to_json(backtest(values, times, 60, settings), {})
    excluded = document["evaluation"]["excluded"]
    assert (excluded["cells"], excluded["gaps"]) == (125, 25)
    assert len(excluded["intervals"]) == backtest_report.EXCLUDED_IN_JSON
    note = backtest_report.policy_table(document).notes[0]
    assert note.endswith(f"; and {25 - backtest_report.EXCLUDED_IN_NOTE} more")


@pytest.mark.parametrize(
    ("max_fill", "excluded"),
    [
        pytest.param(None, (), id="none-scores-every-cell"),
        pytest.param(59, (LONG_GAP,), id="long-gap-excluded"),
    ],
)
def test_observe_fills_gaps_and_excludes_the_long_ones(
    max_fill: int | None, excluded: tuple[tuple[int, int], ...]
) -> None:
    obs = observe(trace(), 60, START, SPEC, max_fill=max_fill)
    assert obs.excluded == excluded
    assert not np.isnan(obs.demand).any()
    assert obs.demand[71] == pytest.approx(40.0)  # between the 40s at cells 69 and 73
