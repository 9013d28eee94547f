"""A backtest on precomputed walk-forward forecasts gives the result it computes itself.

The cold-start sweep computes the forecasts once per lead window and reuses them: the
result must not depend on who computed them, and only the lead window's horizons are read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest.run import BacktestResult, BacktestSettings, backtest, lead_forecast
from forecaster.exceptions import ConfigError
from forecaster.policies import QuantileForecast
from forecaster.policies.predictive import QUANTILE_GRID
from forecaster.workload import WorkloadSpec

STEP = 300
N = 3 * 288  # three days of 5-minute data
SETTINGS = BacktestSettings(
    # a 5-minute cold start on 5-minute data reads horizon 2 alone
    WorkloadSpec(capacity_per_replica=10.0, cold_start=300, max_replicas=20),
    policies=("reactive", "predictive", "hybrid"),
    train_window=86400,
    retrain_every=43200,
    model="ewma",
)


def trace() -> tuple[np.ndarray, pd.DatetimeIndex]:
    rng = np.random.default_rng(0)
    t = np.arange(N)
    values = 50 + 30 * np.sin(2 * np.pi * t / 288) + rng.gamma(2.0, 3.0, N)
    return values, pd.date_range("2026-01-05", periods=N, freq=f"{STEP}s", tz="UTC")


def outcome(result: BacktestResult) -> tuple[object, ...]:
    return result.deployed, result.cost_at_slo, result.forecast, result.frontier["hybrid"]


@pytest.fixture(scope="module")
def computed() -> BacktestResult:
    return backtest(*trace(), STEP, SETTINGS)


def test_its_own_forecasts_give_the_same_result(computed: BacktestResult) -> None:
    values, times = trace()
    forecast = lead_forecast(values, times, STEP, SETTINGS)
    assert forecast.horizons == (2,)
    reused = backtest(values, times, STEP, SETTINGS, forecast=forecast)
    assert outcome(reused) == outcome(computed)


def test_only_the_lead_window_is_read_from_a_wider_forecast(computed: BacktestResult) -> None:
    values, times = trace()
    lead = lead_forecast(values, times, STEP, SETTINGS).values
    garbage = np.full_like(lead, 1e6)  # would plan 1e5 replicas if it were read
    wider = QuantileForecast(
        np.concatenate([garbage, lead, garbage], axis=1), (1, 2, 3), QUANTILE_GRID
    )
    reused = backtest(values, times, STEP, SETTINGS, forecast=wider)
    assert outcome(reused) == outcome(computed)


def test_the_given_forecasts_are_the_ones_planned_on(computed: BacktestResult) -> None:
    values, times = trace()
    doubled = QuantileForecast(
        2 * lead_forecast(values, times, STEP, SETTINGS).values, (2,), QUANTILE_GRID
    )
    reused = backtest(values, times, STEP, SETTINGS, forecast=doubled)
    assert reused.deployed["reactive"] == computed.deployed["reactive"]
    hybrid = reused.frontier["hybrid"][0].metrics, computed.frontier["hybrid"][0].metrics
    assert hybrid[0].replica_hours > hybrid[1].replica_hours


@pytest.mark.parametrize(
    ("horizons", "rows"), [((1, 3), N), ((2,), N - 1)], ids=["missing-horizon", "short"]
)
def test_a_forecast_that_does_not_cover_the_lead_window_is_refused(
    horizons: tuple[int, ...], rows: int
) -> None:
    values, times = trace()
    forecast = QuantileForecast(
        np.zeros((rows, len(horizons), len(QUANTILE_GRID))), horizons, QUANTILE_GRID
    )
    with pytest.raises(ConfigError, match=r"must cover horizons 2\.\.2 .* for each of the 864"):
        backtest(values, times, STEP, SETTINGS, forecast=forecast)
