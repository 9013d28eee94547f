"""Walk-forward schedule and the no-look-ahead proof."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest.walkforward import WalkForward, walk_forward_forecast
from forecaster.exceptions import ConfigError, NotEnoughHistoryError
from forecaster.models import make_model

STEP = 300
N = 3 * 288  # three days of 5-minute data


def trace(seed: int = 0) -> tuple[np.ndarray, pd.DatetimeIndex]:
    rng = np.random.default_rng(seed)
    t = np.arange(N)
    values = 50 + 30 * np.sin(2 * np.pi * t / 288) + rng.gamma(2.0, 3.0, N)
    times = pd.date_range("2026-01-05", periods=N, freq=f"{STEP}s", tz="UTC")
    return values, times


# a small boosting model keeps the test fast; the look-ahead question does not depend on size
PARAMS: dict[str, dict[str, int]] = {"lightgbm": {"n_estimators": 20}}


def forecast(values: np.ndarray, times: pd.DatetimeIndex, model: str) -> np.ndarray:
    result = walk_forward_forecast(
        values,
        times,
        lambda h, q: make_model(model, horizons=h, quantiles=q, **PARAMS.get(model, {})),
        WalkForward(train_window=288, retrain_every=144),
        horizons=(2, 3),
        quantiles=(0.5, 0.9),
    )
    return result.values


def test_too_little_history_is_reported() -> None:
    with pytest.raises(NotEnoughHistoryError, match="needs 30 data steps"):
        WalkForward(30, 5).split(20)


def test_windows_are_validated() -> None:
    with pytest.raises(ConfigError, match="`retrain_every`"):
        WalkForward(10, 0)


@pytest.mark.parametrize("model", ["ewma", "lightgbm"])
def test_no_look_ahead(model: str) -> None:
    values, times = trace()
    original = forecast(values, times, model)
    cut = 288 + 200  # inside the second period
    corrupted_values = values.copy()
    corrupted_values[cut:] = values[cut:] * 50 + 1000
    corrupted = forecast(corrupted_values, times, model)
    # every origin before the cut is unchanged; the evaluation starts at origin 287
    np.testing.assert_array_equal(original[287:cut], corrupted[287:cut])
    assert not np.isnan(original[287:-1]).any()
    # and the corruption does reach later origins, so the comparison can fail
    assert not np.allclose(original[cut:-1], corrupted[cut:-1])


def test_rows_outside_the_evaluation_are_nan() -> None:
    values, times = trace()
    result = forecast(values, times, "ewma")
    assert np.isnan(result[:287]).all()
    assert np.isnan(result[-1]).all()
