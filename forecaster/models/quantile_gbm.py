"""Global quantile gradient boosting over the declarative features, with conformal calibration.

One model learns every series (the series id is a categorical feature, values are divided by
each series' trailing mean). Horizons are forecast directly: ``multi_horizon="stacked"`` fits one
regressor per quantile with the horizon as a feature, ``"per-horizon"`` one regressor per
(horizon, quantile). When ``calibration_window`` is set, the most recent window of the training
data is held out and used to calibrate each quantile by split conformal prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from forecaster.calibration import ConformalCalibrator
from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, NotEnoughHistoryError
from forecaster.features import FeatureConfig, FeatureMatrix, build_features, target_values
from forecaster.models.base import BaseForecaster
from forecaster.panel import Panel

MULTI_HORIZON = ("stacked", "per-horizon")


class QuantileGradientBoosting(BaseForecaster):
    """Shared fit/predict logic; subclasses say which regressor fits one quantile."""

    features: FeatureConfig | None
    multi_horizon: str
    calibration_window: str | None
    max_train_rows: int
    random_state: int

    def make_regressor(self, quantile: float) -> Any:
        """An unfitted regressor of the ``quantile`` level (fit(X, y), predict(X))."""
        raise NotImplementedError

    def _fit_panel(self, panel: Panel) -> None:
        if self.multi_horizon not in MULTI_HORIZON:
            raise ConfigError(
                f"`multi_horizon` must be one of {list(MULTI_HORIZON)}, got {self.multi_horizon!r}"
            )
        self.features_ = self.features or FeatureConfig()
        origins = self._training_origins(panel, self.horizons)
        train, calibration = self._split(panel, origins)
        matrix = build_features(panel, train, self.horizons, self.features_, self._codes(panel))
        ratio = target_values(panel, matrix) / matrix.scale
        rows = np.flatnonzero(np.isfinite(ratio))
        if rows.size < 10 * len(self.horizons):
            raise NotEnoughHistoryError(
                f"only {rows.size} training rows with an observed target; need more history"
            )
        rng = np.random.default_rng(self.random_state)
        if rows.size > self.max_train_rows:
            rows = np.sort(rng.choice(rows, self.max_train_rows, replace=False))
        # A feature never observed in training (a 7-day lag on 5 days of data) carries nothing,
        # and some regressors refuse all-missing columns.
        self.columns_used_ = np.flatnonzero(np.isfinite(matrix.X[rows]).any(axis=0))
        self.feature_names_ = tuple(matrix.names[i] for i in self.columns_used_)
        X = matrix.X[:, self.columns_used_]
        self.regressors_ = {
            key: self.make_regressor(q).fit(X[sel], ratio[sel])
            for key, q, sel in self._groups(matrix.horizon, rows)
        }
        self.calibrator_: ConformalCalibrator | None = None
        if calibration is not None:
            cal = build_features(
                panel, calibration, self.horizons, self.features_, self._codes(panel)
            )
            actual = target_values(panel, cal) / cal.scale
            order = np.argsort(cal.origin, kind="stable")  # conformal halves are in time order
            raw = self._raw_predict(cal)[order]
            self.calibrator_ = ConformalCalibrator(self.quantiles).fit(
                actual[order], raw, cal.horizon[order]
            )

    def _split(
        self, panel: Panel, origins: Sequence[np.ndarray]
    ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """Training origins whose targets end before the calibration window, and the window's."""
        if self.calibration_window is None:
            return list(origins), None
        step = panel.step
        span = max(len(v) for v in panel.values)
        cells = round(parse_duration(self.calibration_window, name="calibration_window") / step)
        # Keep at least three quarters of the history for training on short series.
        cells = min(cells, span // 4)
        if cells * len(panel.values) < 60:
            return list(origins), None
        train, calibration = [], []
        for values, cells_s in zip(panel.values, origins, strict=True):
            cutoff = len(values) - cells
            train.append(cells_s[cells_s + max(self.horizons) < cutoff])
            calibration.append(cells_s[cells_s >= cutoff])
        return train, calibration

    def _groups(
        self, horizon: np.ndarray, rows: np.ndarray
    ) -> list[tuple[tuple[int | None, float], float, np.ndarray]]:
        if self.multi_horizon == "stacked":
            return [((None, q), q, rows) for q in self.quantiles]
        return [
            ((h, q), q, rows[horizon[rows] == h]) for h in self.horizons for q in self.quantiles
        ]

    def _raw_predict(self, matrix: FeatureMatrix) -> np.ndarray:
        X = matrix.X[:, self.columns_used_]
        out = np.zeros((len(X), len(self.quantiles)))
        for j, q in enumerate(self.quantiles):
            if self.multi_horizon == "stacked":
                out[:, j] = self.regressors_[(None, q)].predict(X)
                continue
            for h in self.horizons:
                sel = matrix.horizon == h
                if sel.any():
                    out[sel, j] = self.regressors_[(h, q)].predict(X[sel])
        return out

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        matrix = build_features(panel, origins, self.horizons, self.features_, self._codes(panel))
        scaled = self._raw_predict(matrix)
        if self.calibrator_ is not None:
            scaled = self.calibrator_.transform(scaled, matrix.horizon)
        return scaled * matrix.scale[:, None]

    @property
    def calibration_report(self) -> Any:
        """Coverage before and after calibration per quantile (None when not calibrated)."""
        return None if self.calibrator_ is None else self.calibrator_.report_
