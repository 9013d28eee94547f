"""LightGBM quantile regression (the default prewarm forecaster)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from forecaster.features import FeatureConfig
from forecaster.models.quantile_gbm import QuantileGradientBoosting


class LightGBMQuantile(QuantileGradientBoosting):
    """Global LightGBM model, one booster per quantile (objective ``quantile``).

    Parameters
    ----------
    horizons
        Horizons in grid cells, sorted.
    quantiles
        Quantile levels in (0, 1), sorted.
    features
        Feature declaration (default :class:`~forecaster.features.FeatureConfig`).
    multi_horizon
        ``stacked`` (horizon as a feature) or ``per-horizon`` (one booster per horizon).
    calibration_window
        Most recent span of the training data held out for conformal calibration, or None.
    max_train_rows
        Training rows are sampled down to this many (seeded) to bound the fit time.
    n_estimators, learning_rate, num_leaves, min_child_samples
        LightGBM's own parameters.
    random_state
        Seed of the row sample and of LightGBM's bagging.
    n_jobs
        LightGBM threads. One by default: on a small shared machine OpenMP threads that wait
        for a busy core make a fit many times slower, and walk-forward runs parallelize
        better across models or workloads than inside one booster.

    Examples
    --------
    >>> from forecaster.scenarios import steady_diurnal
    >>> frame = steady_diurnal(days=10, step=300, seed=1)
    >>> model = LightGBMQuantile(horizons=(1, 2), quantiles=(0.5, 0.9), n_estimators=20)
    >>> forecast = model.fit(frame).predict(frame)
    >>> list(forecast.columns)
    ['series', 'origin', 'target_time', 'horizon', 'q0.5', 'q0.9']
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        features: FeatureConfig | None = None,
        multi_horizon: str = "stacked",
        calibration_window: str | None = "3d",
        max_train_rows: int = 200_000,
        n_estimators: int = 200,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 40,
        random_state: int = 0,
        n_jobs: int = 1,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.features = features
        self.multi_horizon = multi_horizon
        self.calibration_window = calibration_window
        self.max_train_rows = max_train_rows
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.random_state = random_state
        self.n_jobs = n_jobs

    def make_regressor(self, quantile: float) -> Any:
        from lightgbm import LGBMRegressor

        return LGBMRegressor(
            objective="quantile",
            alpha=quantile,
            n_estimators=self.n_estimators,
            learning_rate=self.learning_rate,
            num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples,
            subsample=0.8,
            subsample_freq=1,
            colsample_bytree=0.8,
            random_state=self.random_state,
            n_jobs=self.n_jobs,
            verbose=-1,
        )
