from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.evaluation import RollingOrigin, evaluate
from forecaster.exceptions import NotEnoughHistoryError
from forecaster.frame import regularize, validate_frame
from forecaster.models import make_model
from forecaster.scenarios import steady_diurnal


@pytest.fixture(scope="module")
def frame():
    return regularize(validate_frame(steady_diurnal(days=6, step=900, seed=0)), 900)


class Spy:
    """Records what it was fitted on and forecasts the last value it saw at fit time."""

    def __init__(self):
        self.fitted_until = []

    def fit(self, frame):
        self.fitted_until.append(frame["timestamp"].max())
        self.last = frame["value"].iloc[-1]
        return self

    def predict(self, frame, origins):
        return pd.DataFrame(
            {
                "series": "steady-diurnal",
                "origin": origins,
                "target_time": origins + pd.Timedelta(seconds=900),
                "horizon": 1,
                "q0.5": self.last,
                "q0.9": self.last * 1.1,
            }
        )


def test_blocks_need_history_before_the_window():
    with pytest.raises(NotEnoughHistoryError, match="evaluation window of 9 cells"):
        RollingOrigin(horizon=1, eval_cells=9, refit_every=3).split(10)


def test_each_block_is_fitted_on_data_up_to_its_first_origin_only(frame):
    spy = Spy()
    result = evaluate(frame, {"spy": spy}, RollingOrigin(1, 96, 32), step=900, season=96)
    block_starts = pd.date_range(result.start, periods=3, freq=f"{32 * 15}min")
    assert spy.fitted_until == list(block_starts)
    assert result.origins == 96
    assert result.horizon_seconds == 900
    scored = result.forecasts
    # The spy forecasts the value at the block start: its error is checkable by hand.
    first = scored[scored["origin"] < block_starts[1]]
    expected = frame.set_index("timestamp")["value"]
    assert (first["q0.5"] == expected[block_starts[0]]).all()
    mae = np.mean(np.abs(scored["actual"] - scored["q0.5"]))
    assert result.scores.loc["spy", "mae"] == pytest.approx(mae)


def test_scores_of_registered_models(frame):
    models = {
        name: make_model(name, horizons=(2,), quantiles=(0.5, 0.9))
        for name in ("last-value", "seasonal-naive-daily")
    }
    result = evaluate(frame, models, RollingOrigin(2, 96, 48), step=900, season=96)
    scores = result.scores
    assert list(scores.index) == ["last-value", "seasonal-naive-daily"]
    for column in ("mae", "mase", "pinball_0.5", "pinball_0.9", "coverage_0.9", "fit_seconds"):
        assert np.isfinite(scores[column]).all()
    assert (scores["relative_pinball_0.9"] * result.forecasts["actual"].mean()).to_numpy() == (
        pytest.approx(scores["pinball_0.9"].to_numpy())
    )
    assert set(result.forecasts["model"]) == set(models)
