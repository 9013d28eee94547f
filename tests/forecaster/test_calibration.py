from __future__ import annotations

import numpy as np
import pytest

from forecaster.calibration import ConformalCalibrator, coverage
from forecaster.exceptions import ConfigError


def test_conformal_offsets_restore_coverage_of_a_biased_forecast():
    rng = np.random.default_rng(0)
    n = 4000
    actual = rng.normal(10, 2, n)
    groups = np.tile([1, 2], n // 2)
    # The true 0.1/0.5/0.9 quantiles, shifted down by 1.5 (horizon 1) and 0.5 (horizon 2).
    truth = 10 + 2 * np.array([-1.2816, 0.0, 1.2816])
    bias = np.where(groups == 1, 1.5, 0.5)[:, None]
    predicted = np.tile(truth, (n, 1)) - bias
    calibrator = ConformalCalibrator((0.1, 0.5, 0.9)).fit(actual, predicted, groups)
    report = calibrator.report_.set_index("quantile")
    assert report.loc[0.9, "coverage_before"] < 0.8
    for q in (0.1, 0.5, 0.9):
        assert report.loc[q, "coverage_after"] == pytest.approx(q, abs=0.03)
    fresh = rng.normal(10, 2, n)
    adjusted = calibrator.transform(predicted, groups)
    for j, q in enumerate((0.1, 0.5, 0.9)):
        assert coverage(fresh, adjusted[:, j]) == pytest.approx(q, abs=0.03)
    np.testing.assert_allclose(calibrator.offsets_[1] - calibrator.offsets_[2], 1.0, atol=0.25)


def test_small_groups_fall_back_to_pooled_offsets():
    actual = np.arange(100.0)
    groups = np.array([1] * 95 + [2] * 5)
    calibrator = ConformalCalibrator((0.9,), min_samples=30).fit(actual, np.zeros((100, 1)), groups)
    assert 2 not in calibrator.offsets_
    shifted = calibrator.transform(np.zeros((1, 1)), np.array([2]))
    assert shifted[0, 0] == calibrator.offsets_[None][0]


def test_too_few_rows_is_an_error():
    with pytest.raises(ConfigError, match="calibration needs at least 60 observed rows, got 10"):
        ConformalCalibrator((0.9,)).fit(np.ones(10), np.ones((10, 1)), np.ones(10))


def test_coverage_ignores_missing_actuals():
    assert coverage(np.array([1.0, np.nan, 3.0]), np.array([2.0, 0.0, 2.0])) == 0.5
