"""The accuracy benchmark's yardstick: it reads the demand either side of its target."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.hindsight import Hindsight, neighbours_mean
from forecaster.exceptions import ConfigError

STEP = 3600


def _frame(values: np.ndarray) -> pd.DataFrame:
    times = pd.date_range("2024-01-01", periods=len(values), freq=f"{STEP}s", tz="UTC")
    return pd.DataFrame({"series": "a", "timestamp": times, "value": values})


def test_neighbours_mean_takes_the_cells_either_side() -> None:
    values = np.array([1.0, 3.0, np.nan, 7.0, 9.0])
    expected = [3.0, 1.0, 5.0, 9.0, 7.0]  # an end or a gap: the one neighbour observed
    assert neighbours_mean(values) == pytest.approx(expected)
    lonely = neighbours_mean(np.array([np.nan, 1.0, np.nan, np.nan]))
    assert np.isnan(lonely[[1, 3]]).all() and lonely[[0, 2]] == pytest.approx([1.0, 1.0])


def test_offsets_come_from_the_last_calibration_days_only() -> None:
    # Alternating 10, 12: each cell is 2 off its neighbours' mean, up or down. Before the
    # last day, swings of 100 that the offsets must not see.
    hours = 24 * 4
    values = 10.0 + 2.0 * (np.arange(hours) % 2)
    values[: hours - 24] = 100.0 * (np.arange(hours - 24) % 2)
    model = Hindsight(horizons=(1, 2), quantiles=(0.1, 0.9), calibration_days=22 / 24)
    model.fit(_frame(values))
    assert model.offsets_ == pytest.approx([-2.0, 2.0])


def test_forecasts_read_the_demand_around_the_target_after_the_origin() -> None:
    values = 10.0 + 2.0 * (np.arange(24 * 4) % 2)
    frame = _frame(values)
    model = Hindsight(horizons=(1, 2), quantiles=(0.1, 0.9), calibration_days=1).fit(
        frame.iloc[: 24 * 3]
    )
    origin = frame["timestamp"].iloc[80]
    later = frame.copy()
    later.loc[82, "value"] = 30.0  # after the origin: the cell after the first target
    out = model.predict(later, origins=[origin]).set_index("horizon")
    assert out["target_time"].tolist() == [origin + pd.Timedelta(hours=h) for h in (1, 2)]
    # target 81 (12): neighbours 80 (10) and 82 (30); target 82: neighbours 81 and 83 (12)
    assert out.loc[1, ["q0.1", "q0.9"]].tolist() == pytest.approx([18.0, 22.0])
    assert out.loc[2, ["q0.1", "q0.9"]].tolist() == pytest.approx([10.0, 14.0])


def test_it_says_what_it_cannot_do() -> None:
    with pytest.raises(ConfigError, match="not fitted"):
        Hindsight().predict(_frame(np.ones(4)), origins=[])
    with pytest.raises(ConfigError, match="no cell of the calibration span"):
        Hindsight().fit(_frame(np.array([1.0, np.nan, np.nan, np.nan, 2.0])))
