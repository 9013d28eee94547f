"""Planning sizes for a model's window target where it has one for the plan's window."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.backtest.shadow import forecast_demand
from forecaster.backtest.walkforward import WalkForward, walk_forward_forecast
from forecaster.frame import regularize, validate_frame
from forecaster.models import make_model
from forecaster.policies.base import Observation, QuantileForecast
from forecaster.policies.hybrid import HybridPolicy
from forecaster.policies.predictive import PredictivePolicy
from forecaster.scenarios import steady_diurnal
from forecaster.workload import WorkloadPolicy, WorkloadSpec

STEP = 60
HORIZONS = (2, 3, 4)
# cold start 60 s and a 120 s hold: the window is horizons 2..4 of 1-minute cells
SPEC = WorkloadSpec(capacity_per_replica=1.0, cold_start=60.0, target_utilization=1.0,
                    min_replicas=1, max_replicas=100, quantile=0.9)  # fmt: skip
HOLD = 120.0


def forecasts(n: int, window: np.ndarray | None) -> QuantileForecast:
    """Per-horizon q0.9 forecasts of 3, 4 and 5 at every origin, and ``window`` beside."""
    values = np.tile(np.array([3.0, 4.0, 5.0])[None, :, None], (n, 1, 1))
    return QuantileForecast(values, HORIZONS, (0.9,), None if window is None else window[:, None])


def test_window_max_reads_the_window_target_only_for_its_own_window() -> None:
    window = np.array([9.0, 2.0])
    assert forecasts(2, window).window_max(0.9, 2, 4).tolist() == [9.0, 2.0]
    # another window (a shorter cold start or hold) plans on the per-horizon forecasts
    assert forecasts(2, window).window_max(0.9, 3, 4).tolist() == [5.0, 5.0]
    assert forecasts(2, None).window_max(0.9, 2, 4).tolist() == [5.0, 5.0]


def test_predictive_and_hybrid_plans_size_for_the_window_forecast() -> None:
    n, start = 40, 10
    demand = np.full(n, 2.0)
    window = np.full(n, 9.0)

    def plans(forecast: QuantileForecast) -> tuple[np.ndarray, np.ndarray]:
        obs = Observation(demand, float(STEP), start, SPEC, sim_step=15.0, forecast=forecast)
        predictive = PredictivePolicy(hold=HOLD).plan(obs)
        hybrid = HybridPolicy(hold=HOLD, target_utilization=1.0).plan(obs)
        return predictive, hybrid

    with_window, without = plans(forecasts(n, window)), plans(forecasts(n, None))
    assert set(with_window[0].tolist()) == {9}
    assert set(without[0].tolist()) == {5}
    assert with_window[1].max() == 9 and without[1].max() == 5


def test_the_shadow_replay_serves_the_window_forecast() -> None:
    policy = WorkloadPolicy(SPEC, hold=HOLD)
    window = np.array([7.0, 1.0, 6.0])
    assert forecast_demand(forecasts(3, window), policy, STEP).tolist() == [7.0, 1.0, 6.0]
    assert forecast_demand(forecasts(3, None), policy, STEP).tolist() == [5.0, 5.0, 5.0]


def test_walk_forward_carries_the_models_window_forecasts() -> None:
    frame = regularize(validate_frame(steady_diurnal(days=4, step=STEP * 15, seed=2)), STEP * 15)
    values, times = frame["value"].to_numpy(), pd.DatetimeIndex(frame["timestamp"])
    splitter = WalkForward(train_window=3 * 96, retrain_every=48)

    def model(horizons: tuple[int, ...], quantiles: tuple[float, ...]) -> object:
        return make_model("ewma", horizons=horizons, quantiles=quantiles, target="window")

    result = walk_forward_forecast(values, times, model, splitter, HORIZONS, (0.5, 0.9))
    assert result.window is not None and result.window_span == (2, 4)
    served = np.isfinite(result.values[:, 0, 0])
    assert (np.isfinite(result.window).all(axis=1) == served).all()
    # the first period's model, fitted alone, forecasts the same windows
    fitted = model(HORIZONS, (0.5, 0.9)).fit(frame.iloc[: 3 * 96])
    origins = times[3 * 96 - 1 : 3 * 96 + 47]
    expected = fitted.predict_window(frame.iloc[: 3 * 96 + 47], origins=origins)
    np.testing.assert_allclose(
        result.window[3 * 96 - 1 : 3 * 96 + 47], expected[["q0.5", "q0.9"]].to_numpy()
    )
    plain = walk_forward_forecast(
        values, times, lambda h, q: make_model("ewma", horizons=h, quantiles=q), splitter,
        HORIZONS, (0.5, 0.9),
    )  # fmt: skip
    assert plain.window is None


def test_long_forecasts_become_rows_aligned_to_the_grid_with_their_window() -> None:
    frame = regularize(validate_frame(steady_diurnal(days=3, step=STEP * 15, seed=4)), STEP * 15)
    times = pd.DatetimeIndex(frame["timestamp"])
    model = make_model("ewma", horizons=HORIZONS, quantiles=(0.5, 0.9), target="window")
    model.fit(frame)
    origins = times[100:110]
    forecast = QuantileForecast.from_long(
        model.predict(frame, origins=origins), model.predict_window(frame, origins=origins),
        times, HORIZONS, (0.5, 0.9),
    )  # fmt: skip
    assert forecast.window is not None
    assert np.isfinite(forecast.window[100:110]).all() and np.isnan(forecast.window[:100]).all()
    expected = model.predict_window(frame, origins=times[[105]])[["q0.5", "q0.9"]].to_numpy()
    np.testing.assert_array_equal(forecast.window[105], expected[0])
    at_3 = model.predict(frame, origins=times[[105]]).query("horizon == 3")["q0.9"].item()
    assert forecast.values[105, 1, 1] == at_3
    plain = QuantileForecast.from_long(
        model.predict(frame, origins=origins), None, times, HORIZONS, (0.5, 0.9)
    )
    assert plain.window is None and np.array_equal(plain.values, forecast.values, equal_nan=True)
