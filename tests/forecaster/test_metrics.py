from __future__ import annotations

import numpy as np
import pytest

from forecaster.exceptions import DataValidationError
from forecaster.metrics import (
    coverage,
    mae,
    mase,
    peak_underforecast,
    pinball_loss,
    rmse,
    seasonal_naive_scale,
)

ACTUAL = np.array([10.0, 20.0, 30.0, 40.0])
PREDICTED = np.array([12.0, 18.0, 30.0, 36.0])


def test_hand_computed_errors():
    assert mae(ACTUAL, PREDICTED) == pytest.approx((2 + 2 + 0 + 4) / 4)
    assert rmse(ACTUAL, PREDICTED) == pytest.approx(np.sqrt((4 + 4 + 0 + 16) / 4))


@pytest.mark.parametrize(
    ("quantile", "expected"),
    [
        # errors y - p: -2, 2, 0, 4 ; loss = q*e if e >= 0 else (q-1)*e
        (0.5, (1 + 1 + 0 + 2) / 4),
        (0.9, (0.1 * 2 + 0.9 * 2 + 0 + 0.9 * 4) / 4),
        (0.1, (0.9 * 2 + 0.1 * 2 + 0 + 0.1 * 4) / 4),
    ],
)
def test_pinball_loss(quantile, expected):
    assert pinball_loss(ACTUAL, PREDICTED, quantile) == pytest.approx(expected)


def test_mase_divides_by_the_in_sample_seasonal_naive_error():
    history = np.array([1.0, 2.0, 3.0, 5.0, 4.0, 8.0])  # season 2: |3-1|,|5-2|,|4-3|,|8-5|
    assert seasonal_naive_scale(history, 2) == pytest.approx((2 + 3 + 1 + 3) / 4)
    assert mase(ACTUAL, PREDICTED, history, 2) == pytest.approx(2.0 / 2.25)


def test_coverage_and_peak_underforecast():
    assert coverage(ACTUAL, PREDICTED) == 0.5  # 10<=12, 30<=30
    actual = np.arange(1.0, 101.0)
    predicted = actual - 1.0
    predicted[-1] = 200.0  # the very top peak is over-forecast: no shortfall there
    # peaks: values >= the 95th percentile (95.05): 96..100, shortfalls 1,1,1,1,0
    assert peak_underforecast(actual, predicted) == pytest.approx(4 / 5)


def test_metric_errors_are_clear():
    with pytest.raises(DataValidationError, match="must have one shape"):
        mae(ACTUAL, PREDICTED[:2])
    with pytest.raises(DataValidationError, match="no finite"):
        mae(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(DataValidationError, match=r"`quantile` must be in \(0, 1\), got 1.5"):
        pinball_loss(ACTUAL, PREDICTED, 1.5)
    with pytest.raises(DataValidationError, match="never changes"):
        seasonal_naive_scale(np.ones(10), 2)
    with pytest.raises(DataValidationError, match="more than `season`=5"):
        seasonal_naive_scale(np.ones(3), 5)
