"""The window target: a direct forecast of the largest demand over the lead window."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.evaluation import RollingOrigin, evaluate
from forecaster.exceptions import ConfigError
from forecaster.features import window_target
from forecaster.frame import regularize, validate_frame
from forecaster.models import make_model
from forecaster.models.baseline import SeasonalNaive
from forecaster.models.quantile_gbm import QuantileGradientBoosting
from forecaster.scenarios import steady_diurnal

STEP = 900
DAY = 86400 // STEP
HORIZONS = (2, 3, 4, 5)


def spiky(days: int) -> pd.DataFrame:
    """A level of 10 with a spike of 50 at 06:00 and one of 30 at 18:00, every day."""
    values = np.full(days * DAY, 10.0)
    values[6 * 4 :: DAY] = 50.0
    values[18 * 4 :: DAY] = 30.0
    times = pd.date_range("2026-03-02", periods=len(values), freq=f"{STEP}s", tz="UTC")
    return pd.DataFrame({"series": "spiky", "timestamp": times, "value": values})


def test_window_target_is_the_largest_value_of_the_cells_first_to_last_after_each_origin():
    values = np.array([1.0, 7.0, 2.0, 9.0, np.nan, 4.0, 3.0])
    origins = np.arange(len(values))
    expected = [
        np.nanmax(values[o + 2 : o + 4]) if o + 3 < len(values) else np.nan for o in origins
    ]
    np.testing.assert_array_equal(window_target(values, origins, 2, 3), expected)
    # A window of unobserved cells has no target.
    assert np.isnan(window_target(np.array([1.0, np.nan, np.nan, 2.0]), np.array([0]), 1, 2))[0]


def test_seasonal_naive_window_forecast_is_last_days_maximum_over_the_same_window():
    frame = spiky(days=4)
    model = SeasonalNaive(horizons=HORIZONS, quantiles=(0.5, 0.9), target="window").fit(frame)
    assert model.window_span == (2, 5)
    origins = frame["timestamp"].iloc[-DAY:-6]
    forecast = model.predict_window(frame, origins=pd.DatetimeIndex(origins))
    values = frame["value"].to_numpy()
    cells = np.arange(len(frame) - DAY, len(frame) - 6)
    # The series repeats every day, so its errors are 0: the forecast is yesterday's window max.
    expected = [values[o - DAY + 2 : o - DAY + 6].max() for o in cells]
    np.testing.assert_array_equal(forecast["q0.9"].to_numpy(), expected)
    np.testing.assert_array_equal(forecast["q0.5"].to_numpy(), expected)
    assert {50.0, 30.0, 10.0} <= set(expected)  # windows that hold a spike and some that do not
    assert list(forecast.columns) == ["series", "origin", "q0.5", "q0.9"]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return regularize(validate_frame(steady_diurnal(days=12, step=STEP, seed=3)), STEP)


WINDOWED = [
    pytest.param("lightgbm-window", {"n_estimators": 30}, id="lightgbm-direct"),
    pytest.param("lightgbm-window", {"n_estimators": 30, "window_model": "shift"}, id="shift"),
    pytest.param("seasonal-naive-weekly", {"target": "window"}, id="seasonal-naive-weekly"),
    pytest.param("ewma", {"target": "window"}, id="ewma"),
]


@pytest.mark.parametrize(("name", "params"), WINDOWED)
def test_window_forecast_ignores_data_after_its_origin(name, params, frame):
    cut = len(frame) * 3 // 4
    model = make_model(name, horizons=HORIZONS, quantiles=(0.5, 0.9), **params)
    model.fit(frame.iloc[:cut])
    origins = pd.DatetimeIndex(frame["timestamp"].iloc[cut - 1 : cut + 40])
    corrupted = frame.copy()
    later = corrupted["timestamp"] > origins[-1]
    corrupted.loc[later, "value"] = corrupted.loc[later, "value"] * 9 + 5
    before = model.predict_window(frame, origins=origins)
    after = model.predict_window(corrupted, origins=origins)
    pd.testing.assert_frame_equal(before, after)
    assert np.isfinite(before[["q0.5", "q0.9"]].to_numpy()).all()


def test_window_fit_ignores_data_after_its_training_cut(frame):
    """The training cut is the end of the frame handed to ``fit``: refitting on the same
    prefix of a frame whose later data is corrupted gives the same window forecasts."""
    cut = len(frame) * 3 // 4
    corrupted = frame.copy()
    corrupted.loc[cut:, "value"] = corrupted.loc[cut:, "value"] * 9 + 5

    def windows(data: pd.DataFrame) -> pd.DataFrame:
        model = QuantileGradientBoosting(
            horizons=HORIZONS, quantiles=(0.5, 0.9), n_estimators=30, target="window"
        )
        return model.fit(data.iloc[:cut]).predict_window(
            data.iloc[:cut], origins=pd.DatetimeIndex(data["timestamp"].iloc[cut - 30 : cut])
        )

    pd.testing.assert_frame_equal(windows(frame), windows(corrupted))


def test_per_horizon_forecasts_are_the_same_with_and_without_the_window_target(frame):
    params = {"horizons": HORIZONS, "quantiles": (0.9,), "n_estimators": 30}
    plain = make_model("lightgbm", **params)
    # the registered window model also refits (tested below); the target alone changes nothing
    windowed = make_model("lightgbm-window", refit=False, **params)
    pd.testing.assert_frame_equal(
        plain.fit(frame).predict(frame), windowed.fit(frame).predict(frame)
    )
    assert plain.predict_window(frame) is None
    assert len(windowed.predict_window(frame)) == 1


def test_calibrated_window_coverage_is_near_tau_where_the_largest_quantile_falls_short():
    data = regularize(validate_frame(steady_diurnal(days=28, step=STEP, seed=5)), STEP)
    params = {"horizons": HORIZONS, "quantiles": (0.5, 0.9), "n_estimators": 60}
    models = {
        "per-horizon": make_model("lightgbm", **params),
        "direct": make_model("lightgbm-window", window_model="direct", **params),
        "shift": make_model("lightgbm-window", window_model="shift", **params),
    }
    result = evaluate(
        data,
        models,
        RollingOrigin(horizon=HORIZONS[0], eval_cells=10 * DAY, refit_every=2 * DAY),
        step=STEP,
        season=DAY,
        window=(HORIZONS[0], HORIZONS[-1]),
    )
    coverage = result.scores["window_coverage_0.9"]
    for windowed in ("direct", "shift"):
        assert abs(coverage[windowed] - 0.9) <= 0.03, windowed
        # The largest per-horizon q0.9 covers fewer windows: the bias the window target removes.
        assert coverage["per-horizon"] < coverage[windowed] - 0.03, windowed
    # Both refit the same per-horizon model, whose offsets still hold after the refit.
    per_horizon = result.scores["coverage_0.9"]
    assert per_horizon["shift"] == per_horizon["direct"]
    assert abs(per_horizon["direct"] - 0.9) <= 0.03


def test_unknown_target_is_refused_by_name(frame):
    with pytest.raises(ConfigError, match=r"`target` must be one of \['horizon', 'window'\]"):
        make_model("ewma", horizons=HORIZONS, target="peak").fit(frame)


@pytest.mark.parametrize(
    ("target", "window_model"), [("horizon", "direct"), ("window", "direct"), ("window", "shift")]
)
def test_refit_serves_the_full_fit_with_the_offsets_learned_on_the_held_out_window(
    frame, target, window_model
):
    """``refit``: the regressors are those of a fit on all the training data (the
    calibration window included), the offsets those of the held-out fit less its median
    error there, but for the shift model's window offsets (no regressor learned them)."""
    params = {
        "horizons": HORIZONS,
        "quantiles": (0.5, 0.9),
        "n_estimators": 30,
        "window_model": window_model,
    }
    held_out = QuantileGradientBoosting(target=target, **params).fit(frame)
    refitted = QuantileGradientBoosting(target=target, refit=True, **params).fit(frame)
    full = QuantileGradientBoosting(target=target, calibration_window=None, **params).fit(frame)
    origins = pd.DatetimeIndex(frame["timestamp"].iloc[-40:])
    before, after = held_out.calibrator_, refitted.calibrator_
    assert before is not None and after is not None
    assert after.offsets_.keys() == before.offsets_.keys() == before.bias_.keys()
    for group, offsets in before.offsets_.items():
        np.testing.assert_array_equal(offsets - before.bias_[group], after.offsets_[group])
    window_before, window_after = held_out.window_calibrator_, refitted.window_calibrator_
    assert (window_before is not None) == (window_after is not None) == (target == "window")
    if window_before is not None and window_after is not None:
        assert window_after.offsets_.keys() == window_before.offsets_.keys()
        for group, offsets in window_before.offsets_.items():
            bias = window_before.bias_[group] if window_model == "direct" else 0.0
            np.testing.assert_array_equal(offsets - bias, window_after.offsets_[group])
    # Uncalibrated, the refitted model forecasts what the full fit does, not the held-out one.
    refitted.calibrator_ = refitted.window_calibrator_ = None
    pd.testing.assert_frame_equal(refitted.predict(frame, origins), full.predict(frame, origins))
    assert not held_out.predict(frame, origins).equals(full.predict(frame, origins))
    if target == "window":  # its window forecast moved with them
        held_out.calibrator_ = held_out.window_calibrator_ = None
        raw = [m.predict_window(frame, origins)[["q0.5", "q0.9"]] for m in (held_out, refitted)]
        assert not raw[0].equals(raw[1])
