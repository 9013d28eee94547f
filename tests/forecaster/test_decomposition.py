"""The seasonal decomposition model: daily and weekly components recovered and forecast."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from forecaster.models import make_model
from forecaster.models.decomposition import (
    AUTO,
    HALFLIFE_CELLS,
    UNSEEN_HALFLIFE,
    SeasonalDecomposition,
)

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


def _walk_and_noise(seed: int) -> pd.DataFrame:
    """Two series on one grid: a random walk (the last value is the best level) and white noise
    around a constant (the longest smoothing is)."""
    rng = np.random.default_rng(seed)
    cells = 6 * DAY
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    walk = 500 + np.cumsum(rng.normal(0, 5.0, cells))
    noise = 100 + rng.normal(0, 5.0, cells)
    return pd.concat(
        [
            pd.DataFrame({"series": "walk", "timestamp": times, "value": walk}),
            pd.DataFrame({"series": "noise", "timestamp": times, "value": noise}),
        ],
        ignore_index=True,
    )


def test_auto_fits_the_level_half_life_per_series() -> None:
    frame = _walk_and_noise(seed=3)
    model = make_model("mstl", horizons=(1, 2), quantiles=(0.5,)).fit(frame)
    assert isinstance(model, SeasonalDecomposition)
    assert model.halflife == AUTO
    assert model.halflives_["walk"] == HALFLIFE_CELLS[0] * STEP
    assert model.halflives_["noise"] == HALFLIFE_CELLS[-1] * STEP
    # Each series' own half-life beats the other's on it, out of sample: fitted on the first
    # draw, forecast over a second one.
    later = _walk_and_noise(seed=4)
    actual = later.set_index(["series", "timestamp"])["value"]
    origins = pd.DatetimeIndex(later["timestamp"].unique()[DAY:-2])

    def error(halflife: str, series: str) -> float:
        fitted = make_model("mstl", horizons=(1, 2), quantiles=(0.5,), halflife=halflife)
        out = fitted.fit(frame).predict(later, origins)
        out = out[out["series"] == series]
        truth = actual.loc[list(zip(out["series"], out["target_time"], strict=True))]
        return float(np.abs(out["q0.5"].to_numpy() - truth.to_numpy()).mean())

    shortest, longest = f"{STEP // 2}s", f"{int(HALFLIFE_CELLS[-1] * STEP)}s"
    assert error(shortest, "walk") < 0.5 * error(longest, "walk")
    assert error(longest, "noise") < 0.9 * error(shortest, "noise")


def test_a_series_unseen_in_fit_gets_the_fixed_fallback() -> None:
    frame = _walk_and_noise(seed=5)
    model = make_model("mstl", horizons=(1,), quantiles=(0.5,))
    model.fit(frame[frame["series"] == "walk"])
    fallback = make_model("mstl", horizons=(1,), quantiles=(0.5,), halflife=UNSEEN_HALFLIFE)
    fallback.fit(frame[frame["series"] == "walk"])
    assert list(model.halflives_) == ["walk"]
    # The error quantiles were learned at different half-lives; with the same ones, the two
    # forecasts of the unseen series coincide only if its level is the fallback's.
    model.error_quantiles_ = fallback.error_quantiles_
    unseen = frame[frame["series"] == "noise"]
    origins = pd.DatetimeIndex(unseen["timestamp"].iloc[DAY:-1])
    pd.testing.assert_frame_equal(model.predict(unseen, origins), fallback.predict(unseen, origins))


@pytest.mark.parametrize("halflife", ["fast", "0s", "-5m"])
def test_a_bad_half_life_is_refused_naming_it(halflife: object) -> None:
    frame = _walk_and_noise(seed=6)
    with pytest.raises(ConfigError, match="halflife"):
        make_model("mstl", horizons=(1,), quantiles=(0.5,), halflife=halflife).fit(frame)
