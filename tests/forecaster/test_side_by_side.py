"""The boosting models' ``n_jobs``: regressors fitted and predicting side by side on threads,
each on one thread of its engine, give the model of one job."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from forecaster.exceptions import ConfigError
from forecaster.frame import regularize, validate_frame
from forecaster.models import make_model
from forecaster.scenarios import gpu_inference_demand


@pytest.fixture(scope="module")
def frame():
    demand = gpu_inference_demand(days=9, step=900, seed=5, base_rate=50.0, series="a")
    return regularize(validate_frame(demand), 900)


def fitted(frame, n_jobs: int, **params):
    return make_model(
        "lightgbm-window",
        horizons=(1, 2, 3),
        quantiles=(0.5, 0.9, 0.99),
        n_estimators=20,
        n_jobs=n_jobs,
        **params,
    ).fit(frame)


@pytest.mark.parametrize("multi_horizon", ["stacked", "per-horizon"])
@pytest.mark.parametrize("engine", ["lightgbm", "hist-gbm"])
def test_any_number_of_jobs_gives_the_model_of_one(frame, multi_horizon, engine):
    one = fitted(frame, 1, multi_horizon=multi_horizon, engine=engine)
    three = fitted(frame, 3, multi_horizon=multi_horizon, engine=engine)
    # Forecasts and window forecasts bit for bit, each model predicting with its own jobs.
    assert one.predict(frame).equals(three.predict(frame))
    assert one.predict_window(frame).equals(three.predict_window(frame))
    for mine, theirs in (
        (one.calibrator_, three.calibrator_),
        (one.window_calibrator_, three.window_calibrator_),
    ):
        assert mine.offsets_.keys() == theirs.offsets_.keys()
        for group, offsets in mine.offsets_.items():
            np.testing.assert_array_equal(offsets, theirs.offsets_[group])


def test_the_regressors_run_on_threads_of_their_own(frame, monkeypatch):
    from lightgbm import LGBMRegressor

    seen: set[str] = set()
    fit = LGBMRegressor.fit

    def noting(self, *args, **kwargs):
        seen.add(threading.current_thread().name)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(LGBMRegressor, "fit", noting)
    fitted(frame, 2)
    assert seen and all(name.startswith("regressor") for name in seen)
    seen.clear()
    fitted(frame, 1)
    assert seen == {threading.main_thread().name}


@pytest.mark.parametrize("n_jobs", [0, -1, 1.5, "2"])
def test_n_jobs_is_a_whole_number_from_one(frame, n_jobs):
    with pytest.raises(ConfigError, match="n_jobs"):
        fitted(frame, n_jobs)
