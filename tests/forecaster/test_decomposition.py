"""The seasonal decomposition model: daily and weekly components recovered and forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.models import make_model
from forecaster.models.decomposition import SeasonalDecomposition

STEP = 1800
DAY = 86400 // STEP


def seasonal(days: int, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Level 100, a daily wave, a weekend dip and seeded noise; the two components too."""
    cells = days * DAY
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")  # a Monday
    daily = 30 * np.sin(2 * np.pi * np.arange(cells) / DAY)
    weekly = np.where(times.dayofweek >= 5, -25.0, 10.0)
    noise = np.random.default_rng(seed).normal(0, 1.0, cells)
    frame = pd.DataFrame({"series": "s", "timestamp": times, "value": 100 + daily + weekly + noise})
    return frame, daily, weekly


def test_components_are_recovered_from_three_weeks() -> None:
    frame, daily, weekly = seasonal(days=21, seed=0)
    model = make_model("mstl", horizons=(1,), quantiles=(0.5,)).fit(frame)
    assert isinstance(model, SeasonalDecomposition)
    day_profile, week_profile = model.profiles_["s"]
    assert (len(day_profile), len(week_profile)) == (DAY, 7 * DAY)
    # Monday 00:00 is slot 0 of both profiles only if the slots follow the epoch: read them as
    # the model does, at the frame's own cells.
    cells = np.arange(len(frame))
    total = model.seasonal(_panel(frame), 0, cells)
    truth = daily + weekly - weekly.mean()
    assert np.corrcoef(total, truth)[0, 1] > 0.99
    assert np.abs(total - truth).mean() < 2.0


def test_the_weekend_is_forecast_where_yesterday_is_wrong() -> None:
    frame, _, _ = seasonal(days=21, seed=1)
    # Origins on Saturday morning: yesterday was a weekday, the decomposition knows better.
    saturday = frame["timestamp"][frame["timestamp"].dt.dayofweek == 5].iloc[-DAY:]
    origins = pd.DatetimeIndex(saturday.iloc[4:-8])
    train = frame[frame["timestamp"] < saturday.iloc[0]]
    actual = frame.set_index("timestamp")["value"]

    def error(name: str) -> float:
        model = make_model(name, horizons=(4,), quantiles=(0.5,)).fit(train)
        out = model.predict(frame, origins)
        return float(np.abs(out["q0.5"].to_numpy() - actual[out["target_time"]].to_numpy()).mean())

    assert error("mstl") < 0.3 * error("seasonal-naive-daily")


def test_a_season_longer_than_half_the_history_is_left_out() -> None:
    frame, _, _ = seasonal(days=10, seed=2)
    model = make_model("mstl", horizons=(1,), quantiles=(0.5, 0.9)).fit(frame)
    day_profile, week_profile = model.profiles_["s"]
    assert np.abs(day_profile).max() > 20  # ten days hold the daily wave
    assert not week_profile.any()  # not two weeks: no weekly component
    assert np.isfinite(model.predict(frame)[["q0.5", "q0.9"]].to_numpy()).all()


def _panel(frame: pd.DataFrame):
    from forecaster.panel import Panel

    return Panel.from_frame(frame, STEP)
