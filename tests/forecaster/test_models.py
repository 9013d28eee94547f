"""One contract suite, run over every registered model."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from forecaster.exceptions import ConfigError, DataValidationError, UnknownNameError
from forecaster.features import FeatureConfig, with_hour_phase
from forecaster.frame import regularize, validate_frame
from forecaster.models import MODELS, make_model
from forecaster.scenarios import gpu_inference_demand

FAST = {
    "lightgbm": {"n_estimators": 25},
    "hist-gbm": {"n_estimators": 25},
    "lightgbm-window-hourly": {"n_estimators": 25},
    "combination": {
        "candidate_params": {
            "lightgbm-window": {"n_estimators": 25},
            "lightgbm-window-hourly": {"n_estimators": 25},
        }
    },
    "auto": {
        "candidate_params": {
            "lightgbm": {"n_estimators": 25},
            "lightgbm-window": {"n_estimators": 25},
        }
    },
}
QUANTILES = (0.1, 0.5, 0.9)
HORIZONS = (1, 3)


def model(name, **params):
    return make_model(name, horizons=HORIZONS, quantiles=QUANTILES, **FAST.get(name, {}), **params)


@pytest.fixture(scope="module")
def frame():
    parts = [
        gpu_inference_demand(days=9, step=900, seed=1, base_rate=5.0, series="small"),
        gpu_inference_demand(days=9, step=900, seed=2, base_rate=500.0, series="large"),
    ]
    return regularize(validate_frame(pd.concat(parts)), 900)


@pytest.fixture(scope="module", params=sorted(MODELS))
def fitted(request, frame):
    return request.param, model(request.param).fit(frame)


def test_fit_returns_self_and_params_round_trip(fitted, frame):
    name, estimator = fitted
    assert estimator.get_params()["horizons"] == HORIZONS
    assert clone(estimator).get_params() == estimator.get_params()
    fresh = model(name)
    assert fresh.fit(frame) is fresh


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predict_before_fit_raises(name, frame):
    with pytest.raises(NotFittedError):
        model(name).predict(frame)


def test_output_is_long_monotone_and_non_negative(fitted, frame):
    _, estimator = fitted
    origins = frame["timestamp"].drop_duplicates().iloc[-20:-5]
    out = estimator.predict(frame, origins=pd.DatetimeIndex(origins))
    assert list(out.columns) == [
        "series",
        "origin",
        "target_time",
        "horizon",
        "q0.1",
        "q0.5",
        "q0.9",
    ]
    assert len(out) == 2 * len(origins) * len(HORIZONS)
    step = pd.Timedelta(seconds=900)
    assert ((out["target_time"] - out["origin"]) == out["horizon"] * step).all()
    values = out[["q0.1", "q0.5", "q0.9"]].to_numpy()
    assert np.isfinite(values).all()
    assert (values >= 0).all()
    assert (np.diff(values, axis=1) >= 0).all()


def test_default_origin_is_the_last_cell_of_each_series(fitted, frame):
    _, estimator = fitted
    out = estimator.predict(frame)
    last = frame.groupby("series")["timestamp"].max()
    assert (out.groupby("series")["origin"].max() == last).all()
    assert len(out) == 2 * len(HORIZONS)


def test_forecast_ignores_data_after_its_origin(fitted, frame):
    _, estimator = fitted
    origin = frame["timestamp"].iloc[len(frame) // 4 * 3]
    corrupted = frame.copy()
    later = corrupted["timestamp"] > origin
    corrupted.loc[later, "value"] = corrupted.loc[later, "value"] * 7 + 3
    before = estimator.predict(frame, origins=pd.DatetimeIndex([origin]))
    after = estimator.predict(corrupted, origins=pd.DatetimeIndex([origin]))
    pd.testing.assert_frame_equal(before, after)


def test_same_seed_same_forecast(fitted, frame):
    name, estimator = fitted
    again = model(name).fit(frame)
    pd.testing.assert_frame_equal(estimator.predict(frame), again.predict(frame))


def test_forecast_scales_with_the_series(fitted, frame):
    _, estimator = fitted
    out = estimator.predict(frame).groupby("series")["q0.5"].mean()
    assert out["large"] > 20 * out["small"]


def test_origin_off_the_grid_is_refused(fitted, frame):
    _, estimator = fitted
    off = frame["timestamp"].iloc[10] + pd.Timedelta(seconds=7)
    with pytest.raises(DataValidationError, match="not on the 900s grid"):
        estimator.predict(frame, origins=pd.DatetimeIndex([off]))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        pytest.param({"horizons": ()}, r"`horizons` must be whole cells >= 1", id="no-horizon"),
        pytest.param({"horizons": (0,)}, r"`horizons` must be whole cells >= 1", id="zero"),
        pytest.param({"horizons": (3, 1)}, r"sorted and unique", id="unsorted"),
        pytest.param({"quantiles": (0.5, 1.0)}, r"`quantiles` must lie in \(0, 1\)", id="q1"),
        pytest.param({"quantiles": (0.9, 0.5)}, r"sorted and unique", id="q-unsorted"),
    ],
)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_bad_params_fail_at_fit_naming_the_parameter(name, params, match, frame):
    estimator = make_model(name, **{"horizons": HORIZONS, "quantiles": QUANTILES, **params})
    with pytest.raises(ConfigError, match=match):
        estimator.fit(frame)


def test_unknown_model_lists_the_registry():
    with pytest.raises(
        UnknownNameError,
        match=r"unknown model 'prophet'; registered models: auto, combination, ewma",
    ):
        make_model("prophet")


def test_the_hourly_window_model_is_the_window_model_with_the_hours_phase_added():
    declared = FeatureConfig(lags=(0, 1), calendar=("day_of_week",))
    for features in (None, declared):
        hourly = make_model("lightgbm-window-hourly", features=features, n_estimators=7)
        window = make_model(
            "lightgbm-window", features=with_hour_phase(features or FeatureConfig())
        )
        assert hourly.get_params() == window.get_params() | {"n_estimators": 7}
    # a combination handing its features to its candidates keeps the hour's phase in this one
    auto = make_model("auto", candidates=("ewma", "lightgbm-window-hourly"), features=declared)
    assert auto._candidate("lightgbm-window-hourly").features == with_hour_phase(declared)


def test_frame_that_is_not_on_a_grid_is_refused():
    times = pd.to_datetime([0, 60, 120, 200, 260], unit="s", utc=True)
    irregular = pd.DataFrame({"series": "a", "timestamp": times, "value": 1.0})
    with pytest.raises(DataValidationError, match="not on a regular grid of 60s"):
        model("last-value").fit(irregular)


def test_gbm_multi_horizon_strategies_and_calibration_report(frame):
    stacked = model("lightgbm").fit(frame)
    per_horizon = model("lightgbm", multi_horizon="per-horizon").fit(frame)
    assert set(stacked.regressors_) == {(None, q) for q in QUANTILES}
    assert set(per_horizon.regressors_) == {(h, q) for h in HORIZONS for q in QUANTILES}
    report = stacked.calibration_report
    assert list(report["quantile"]) == list(QUANTILES)
    assert report["coverage_before"].between(0, 1).all()
    with pytest.raises(ConfigError, match="`multi_horizon` must be one of"):
        model("lightgbm", multi_horizon="recursive").fit(frame)
    with pytest.raises(ConfigError, match="`engine` must be one of"):
        model("lightgbm", engine="xgboost").fit(frame)
    with pytest.raises(ConfigError, match="`baseline` must be one of"):
        model("lightgbm", baseline="mean").fit(frame)


def test_last_value_baseline_needs_lag_zero(frame):
    from forecaster.features import FeatureConfig

    no_lag_zero = FeatureConfig(lags=(1, 2))
    with pytest.raises(ConfigError, match="needs lag 0"):
        model("lightgbm", features=no_lag_zero).fit(frame)
    fitted = model("lightgbm", features=no_lag_zero, baseline="none").fit(frame)
    assert np.isfinite(fitted.predict(frame)[["q0.1", "q0.5", "q0.9"]].to_numpy()).all()


@pytest.mark.parametrize("seed", range(5))
def test_forward_fill_is_pandas_ffill(seed):
    from forecaster.models.baseline import forward_fill

    rng = np.random.default_rng(seed)
    for length in (0, 1, 2, 7, 40):
        values = rng.normal(size=length)
        values[rng.random(length) < 0.4] = np.nan
        if length > 2:
            values[1] = np.inf  # a value like any other, carried
        expected = pd.Series(values).ffill().to_numpy()
        np.testing.assert_array_equal(forward_fill(values), expected)


def test_a_calibration_window_too_short_to_calibrate_says_so(frame, caplog):
    with caplog.at_level("WARNING", logger="forecaster.models.quantile_gbm"):
        short = model("lightgbm", calibration_window="1h").fit(frame)
    assert short.calibrator_ is None
    held = re.search(r"calibration_window '1h' holds (\d+) forecast origins", caplog.text)
    assert held is not None and 0 < int(held.group(1)) < 60
    assert "uncalibrated" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="forecaster.models.quantile_gbm"):
        default = model("lightgbm").fit(frame)
    assert default.calibrator_ is not None and not caplog.text
