"""The boosting models' ``n_seeds``: the mean of boosters drawn from distinct seeds."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from forecaster.frame import regularize, validate_frame
from forecaster.models import make_model
from forecaster.models.quantile_gbm import SeedAverage
from forecaster.scenarios import gpu_inference_demand

QUANTILES = (0.5, 0.9)
HORIZONS = (1, 3)


def model(n_seeds: int, random_state: int = 0, name: str = "lightgbm-window"):
    return make_model(
        name,
        horizons=HORIZONS,
        quantiles=QUANTILES,
        n_estimators=25,
        n_seeds=n_seeds,
        random_state=random_state,
    )


@pytest.fixture(scope="module")
def frame():
    demand = gpu_inference_demand(days=9, step=900, seed=3, base_rate=50.0, series="a")
    return regularize(validate_frame(demand), 900)


@pytest.fixture(scope="module")
def averaged(frame):
    return model(3, random_state=1).fit(frame)


def test_each_quantile_averages_boosters_of_consecutive_distinct_seeds(averaged, frame):
    for regressor in [*averaged.regressors_.values(), *averaged.window_regressors_.values()]:
        assert isinstance(regressor, SeedAverage)
        # random_state 1 with three boosters: seeds 3, 4, 5 (random_state 0 has 0, 1, 2)
        assert [m.get_params()["random_state"] for m in regressor.members] == [3, 4, 5]
    regressor = averaged.regressors_[(None, 0.9)]
    X = np.random.default_rng(0).normal(size=(50, len(averaged.columns_used_)))
    each = np.array([m.predict(X) for m in regressor.members])
    assert not np.allclose(each[0], each[1])  # the seeds drew different boosters
    np.testing.assert_allclose(regressor.predict(X), each.mean(axis=0))


def test_one_seed_is_the_single_booster_of_the_random_state(frame):
    single = model(1, random_state=2).fit(frame)
    regressor = single.regressors_[(None, 0.5)]
    assert not isinstance(regressor, SeedAverage)
    assert regressor.get_params()["random_state"] == 2


def test_the_average_moves_less_with_the_random_state_than_one_booster(frame):
    """Four random states' q0.9 window forecasts lie closer together averaged over three
    boosters each than from one booster each."""

    def spread(n_seeds: int) -> float:
        forecasts = np.array(
            [
                model(n_seeds, random_state=r).fit(frame).predict_window(frame)["q0.9"]
                for r in range(4)
            ]
        )
        return float((forecasts.max(axis=0) - forecasts.min(axis=0)).mean())

    single, averaged = spread(1), spread(3)
    assert 0 < averaged < single


def test_the_average_ignores_data_after_its_origin(averaged, frame):
    origin = frame["timestamp"].iloc[len(frame) // 4 * 3]
    corrupted = frame.copy()
    later = corrupted["timestamp"] > origin
    corrupted.loc[later, "value"] = corrupted.loc[later, "value"] * 7 + 3
    at = pd.DatetimeIndex([origin])
    pd.testing.assert_frame_equal(
        averaged.predict_window(frame, origins=at), averaged.predict_window(corrupted, origins=at)
    )


def test_the_fitted_average_pickles(averaged, frame):
    again = pickle.loads(pickle.dumps(averaged))
    pd.testing.assert_frame_equal(again.predict(frame), averaged.predict(frame))


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "4", None])
@pytest.mark.parametrize("name", ["lightgbm", "hist-gbm", "lightgbm-window"])
def test_a_bad_count_is_refused_before_any_data_naming_it(name, bad):
    with pytest.raises(ConfigError, match=rf"`n_seeds` must be a whole number >= 1, got {bad!r}"):
        model(bad, name=name).check_params()


def test_the_boosting_models_are_the_ones_that_average() -> None:
    from forecaster.exceptions import UnknownNameError
    from forecaster.models import MODELS, averages_boosters

    assert sorted(n for n in MODELS if averages_boosters(n)) == [
        "hist-gbm",
        "lightgbm",
        "lightgbm-window",
        "lightgbm-window-hourly",
        "lightgbm-window-shift",
    ]
    with pytest.raises(UnknownNameError, match="unknown model 'prophet'"):
        averages_boosters("prophet")
