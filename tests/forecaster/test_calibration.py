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


def test_unbiased_offsets_keep_the_spread_and_drop_each_groups_median_error():
    rng = np.random.default_rng(1)
    n = 4000
    actual = rng.normal(10, 2, n)
    groups = np.tile([1, 2], n // 2)
    truth = 10 + 2 * np.array([0.0, 1.2816])  # the true 0.5 and 0.9 quantiles
    bias = np.where(groups == 1, 3.0, -1.0)[:, None]  # each group's forecast off by its bias
    predicted = np.tile(truth, (n, 1)) - bias
    calibrator = ConformalCalibrator((0.5, 0.9)).fit(actual, predicted, groups)
    unbiased = calibrator.unbiased()
    for group, shift in ((1, 3.0), (2, -1.0)):
        assert calibrator.bias_[group] == pytest.approx(shift, abs=0.15)
        # What is left is the offset an unbiased forecast would need: about 0 at both levels.
        np.testing.assert_allclose(unbiased.offsets_[group], 0.0, atol=0.2)
        np.testing.assert_allclose(
            calibrator.offsets_[group] - unbiased.offsets_[group], calibrator.bias_[group]
        )
    fixed = np.tile(truth, (n, 1))  # the bias removed, as a refitted model would
    adjusted = unbiased.transform(fixed, groups)
    assert coverage(rng.normal(10, 2, n), adjusted[:, 1]) == pytest.approx(0.9, abs=0.03)
    # Without a 0.5 column there is no median forecast to read a bias from: unchanged.
    plain = ConformalCalibrator((0.9,)).fit(actual, predicted[:, 1:], groups)
    assert plain.unbiased().offsets_.keys() == plain.offsets_.keys()
    for group, offsets in plain.offsets_.items():
        np.testing.assert_array_equal(plain.unbiased().offsets_[group], offsets)


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
