from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from forecaster.frame import validate_frame
from forecaster.scenarios import (
    SCENARIOS,
    burst_factor,
    gpu_inference_demand,
    gpu_utilization,
    viral_launch,
)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_are_valid_and_seeded(name):
    first = SCENARIOS[name](14, 60, 3)
    validate_frame(first)
    pd.testing.assert_frame_equal(first, SCENARIOS[name](14, 60, 3))
    assert not first.equals(SCENARIOS[name](14, 60, 4))


def test_daily_and_weekly_cycles_show_in_the_demand():
    frame = gpu_inference_demand(days=14, step=300, seed=0, bursts_per_day=0, trend_per_week=0)
    times = frame["timestamp"]
    by_hour = frame.groupby(times.dt.hour)["value"].mean()
    assert by_hour.loc[14:16].mean() > 2.5 * by_hour.loc[2:4].mean()
    weekend = times.dt.dayofweek >= 5
    assert frame.loc[weekend, "value"].mean() < 0.8 * frame.loc[~weekend, "value"].mean()


def test_viral_ramp_goes_from_100_to_10000_requests_per_hour_within_an_hour():
    frame = viral_launch(days=21, step=60, seed=0)
    hourly = frame.set_index("timestamp")["value"].resample("1h").mean() * 3600
    assert 50 < hourly.iloc[: len(hourly) // 2].median() < 200
    # The ramp is the largest hour-over-hour rise; the hour before it is still ~100/h
    # and one hour after it starts the rate is past 10,000/h (times the afternoon peak).
    ramp = int(np.nanargmax((hourly / hourly.shift(1)).to_numpy()))
    assert hourly.iloc[ramp - 1] < 300
    assert hourly.iloc[ramp + 1] > 10_000
    assert hourly.index[ramp] == pd.Timestamp("2026-01-19 13:00", tz="UTC")


def test_outage_leaves_a_gap_of_missing_rows():
    frame = viral_launch(days=21, step=60, seed=0)
    gaps = frame["timestamp"].diff().dt.total_seconds()
    assert gaps.max() == pytest.approx(3 * 3600 + 60)


def test_gpu_utilization_follows_demand_over_capacity():
    demand = np.array([0.0, 10.0, 10.0, 10.0, 50.0, 50.0])
    util = gpu_utilization(demand, 10.0, target_utilization=0.5, lag_steps=1, seed=0)
    assert ((util >= 0) & (util <= 100)).all()
    # Demand 50 arrives before the lagging replicas: the fleet saturates for one step.
    assert util[4] == pytest.approx(100, abs=3)
    assert util[5] == pytest.approx(50, abs=3)
    with pytest.raises(ConfigError, match="`capacity_per_replica` must be positive, got 0"):
        gpu_utilization(demand, 0)


def test_office_hours_is_idle_outside_weekday_working_hours():
    frame = SCENARIOS["office-hours"](14, 60, 0)
    times = frame["timestamp"]
    working = (times.dt.hour >= 8) & (times.dt.hour < 19) & (times.dt.dayofweek < 5)
    # a rare late request, ~1/500 of the working-day rate: most idle minutes see none
    assert (frame.loc[~working, "value"] == 0).mean() > 0.95
    assert frame.loc[~working, "value"].mean() < 0.01 * frame.loc[working, "value"].mean()


def test_burst_factor_replays_the_bursts_of_the_same_draw() -> None:
    # A rate so high that Poisson noise is ~1e-4 of it, and no extra noise: the demand with
    # bursts over the demand without them is the bursts' factor.
    kwargs = {"days": 7, "step": 60, "seed": 3, "base_rate": 1e6, "noise": 0.0}
    bursty = gpu_inference_demand(**kwargs)["value"].to_numpy()
    calm = gpu_inference_demand(**kwargs, bursts_per_day=0.0)["value"].to_numpy()
    factor = burst_factor(7, 60, 3)
    assert factor.shape == bursty.shape
    assert factor.max() > 2 and (factor == 1).mean() > 0.8  # some bursts, mostly none
    np.testing.assert_allclose(bursty / calm, factor, rtol=1e-3)
    assert (burst_factor(7, 60, 3, bursts_per_day=0.0) == 1).all()
