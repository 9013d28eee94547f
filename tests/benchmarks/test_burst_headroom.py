"""The burst benchmark's foresight: the future it plans on, and the headroom it picks."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.burst_headroom import cheapest_meeting, foresight, parse_args, scenario
from forecaster.backtest.metrics import Metrics
from forecaster.backtest.tuning import Deployed
from forecaster.policies import QuantileForecast


def test_foresight_plans_on_the_future_it_forecast_and_keeps_the_model_where_unknown() -> None:
    future = np.array([1.0, 2.0, 3.0, np.nan, 5.0, 6.0])
    horizons, quantiles = (1, 2), (0.5, 0.9)
    model = np.full((6, 2, 2), 9.0)
    model[0] = np.nan  # no forecast was issued from origin 0
    forecast = QuantileForecast(model, horizons, quantiles, window=np.full((6, 2), 8.0))
    known = foresight(forecast, future)
    # origin 1: horizons 1 and 2 target cells 2 and 3; cell 3 has no data
    assert known.values[1, 0].tolist() == [3.0, 3.0]
    assert known.values[1, 1].tolist() == [9.0, 9.0]
    assert known.window is not None
    assert known.window[1].tolist() == [8.0, 8.0]  # part of the window unknown: the model's
    assert known.values[3].tolist() == [[5.0, 5.0], [6.0, 6.0]]
    assert known.window[3].tolist() == [6.0, 6.0]  # the window's largest value
    assert known.values[5].tolist() == [[9.0, 9.0], [9.0, 9.0]]  # past the end: the model's
    assert np.isnan(known.values[0]).all()  # no forecast issued: none planned on


def _scored(cost: float, unserved: float) -> Deployed:
    metrics = Metrics(cost / 4, cost, unserved, 0.0, 0, 0, 0.5)
    return Deployed("hybrid", {}, metrics, metrics, 0.001, 0, 1.0)


def test_the_cheapest_setting_meeting_the_slo_is_chosen() -> None:
    scores = [_scored(30.0, 0.0), _scored(10.0, 0.01), _scored(20.0, 0.0009)]
    assert cheapest_meeting(scores) is scores[2]
    assert cheapest_meeting(scores[1:2]) is None


def test_the_scenario_divides_out_exactly_its_bursts() -> None:
    values, times, factor = scenario("steady-diurnal")
    assert len(values) == len(times) == len(factor) == 28 * 1440
    busy = factor > 1
    assert 0.005 < busy.mean() < 0.05  # 1.5 bursts a day of 5-20 minutes
    # within a burst the demand is the factor above its neighbourhood's
    calm = values / factor
    assert np.nanmedian(values[busy]) > 2 * np.nanmedian(calm[busy])


def test_unknown_scenarios_exit_2_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(["--scenarios", "viral-launch,flash-crowd"])
    assert raised.value.code == 2
    assert "unknown scenarios ['flash-crowd']" in capsys.readouterr().err
