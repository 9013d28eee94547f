"""The history serving keeps per series is enough for every declared feature."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.features import FeatureConfig, build_features
from forecaster.panel import Panel
from forecaster.scenarios import gpu_inference_demand
from training.pyfunc import history_cells

STEP = 300


@pytest.mark.parametrize(
    "config",
    [
        FeatureConfig(),
        FeatureConfig(burst_window="6h", burst_reference="3h"),
        FeatureConfig(seasonal_lags=("1d",), burst_window="1d"),
    ],
    ids=["default", "bursts", "day-of-bursts"],
)
def test_features_at_the_last_origin_read_no_further_back_than_the_kept_history(
    config: FeatureConfig,
) -> None:
    values = gpu_inference_demand(days=12, step=STEP, seed=4)["value"].to_numpy()
    horizons = (1, 3)
    kept = history_cells(config, STEP, horizons)
    assert kept < len(values)

    # Served from the last `kept` cells, the features equal those of the whole history
    # (the calendar reads the target time, the same in both once the start moves along).
    whole = Panel(STEP, ("s",), np.array([0]), (values,))
    start = (len(values) - kept) * STEP
    tail = Panel(STEP, ("s",), np.array([start]), (values[-kept:],))
    expected = build_features(whole, [np.array([len(values) - 1])], horizons, config).X
    served = build_features(tail, [np.array([kept - 1])], horizons, config).X
    np.testing.assert_allclose(served, expected, rtol=1e-5)


def test_the_kept_history_holds_what_the_oldest_burst_of_the_window_is_judged_by() -> None:
    config = FeatureConfig(seasonal_lags=(), burst_window="1d", burst_reference="2h")
    values = 10 + np.random.default_rng(5).normal(0, 1, 12 * 288)
    oldest = len(values) - 288  # the first cell of the last origin's one-day window
    values[oldest] = 16.0  # six deviations over a quiet reference: a burst...
    values[oldest - 20] = 1000.0  # ...but not against the two hours before it, which hold this
    kept = history_cells(config, STEP, (1,))
    assert len(values) - kept <= oldest - 20  # the kept history holds the spike

    def bursts(start: int) -> float:
        panel = Panel(STEP, ("s",), np.array([start * STEP]), (values[start:],))
        matrix = build_features(panel, [np.array([len(values) - start - 1])], (1,), config)
        return float(matrix.X[0, list(matrix.names).index("burst_share_1d")])

    assert bursts(len(values) - kept) == bursts(0)
    assert bursts(oldest - 10) > bursts(0)  # a shorter history would have seen one more
