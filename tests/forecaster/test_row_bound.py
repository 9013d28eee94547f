"""A large panel's training and calibration matrices are bounded by ``max_train_rows``: the
origins are sampled before their features are built, so memory does not grow with the fleet."""

from __future__ import annotations

import pandas as pd

from forecaster.models.quantile_gbm import QuantileGradientBoosting
from forecaster.scenarios import gpu_inference_demand


def _panel(series: int) -> pd.DataFrame:
    return pd.concat(
        [
            gpu_inference_demand(days=4, step=300, seed=k, series=f"w{k}", bursts_per_day=0)
            for k in range(series)
        ],
        ignore_index=True,
    )


def _model(max_train_rows: int) -> QuantileGradientBoosting:
    return QuantileGradientBoosting(
        horizons=(1, 2), quantiles=(0.5, 0.9), calibration_window="1d",
        max_train_rows=max_train_rows, n_estimators=10,
    )  # fmt: skip


def _calibration_rows(model: QuantileGradientBoosting) -> int:
    report = model.calibration_report
    return int(report["rows"].iloc[0])


def test_the_calibration_matrix_is_bounded_on_a_large_panel() -> None:
    frame = _panel(20)  # 20 series x 288 calibration origins x 2 horizons = 11,520 rows
    bounded = _model(max_train_rows=1_000).fit(frame)
    whole = _model(max_train_rows=1_000_000).fit(frame)
    # The report counts the later half of the calibration rows.
    assert _calibration_rows(bounded) <= 1_000 // 2
    assert _calibration_rows(whole) > 10 * _calibration_rows(bounded)


def test_the_sample_is_seeded_and_a_panel_within_the_bound_is_kept_whole() -> None:
    frame = _panel(3)
    first, second = _model(1_000).fit(frame), _model(1_000).fit(frame)
    pd.testing.assert_frame_equal(first.predict(frame), second.predict(frame))
    within = _model(1_000_000).fit(frame)
    larger = _model(2_000_000).fit(frame)  # both bounds hold every row: the same model
    pd.testing.assert_frame_equal(within.predict(frame), larger.predict(frame))
