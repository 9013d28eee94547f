"""scikit-learn HistGradientBoosting quantile regression: the alternative to LightGBM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forecaster.features import FeatureConfig
from forecaster.models.quantile_gbm import QuantileGradientBoosting


class HistGradientBoostingQuantile(QuantileGradientBoosting):
    """Global HistGradientBoosting model, one regressor per quantile (loss ``quantile``).

    Parameters are those of :class:`~forecaster.models.quantile_lgbm.LightGBMQuantile`, with
    scikit-learn's ``max_iter``, ``learning_rate``, ``max_leaf_nodes`` and ``min_samples_leaf``.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        features: FeatureConfig | None = None,
        multi_horizon: str = "stacked",
        calibration_window: str | None = "3d",
        max_train_rows: int = 200_000,
        max_iter: int = 200,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 40,
        random_state: int = 0,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.features = features
        self.multi_horizon = multi_horizon
        self.calibration_window = calibration_window
        self.max_train_rows = max_train_rows
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def make_regressor(self, quantile: float) -> Any:
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(
            loss="quantile",
            quantile=quantile,
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf,
            categorical_features=[0],
            random_state=self.random_state,
        )
