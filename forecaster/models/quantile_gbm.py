"""Global quantile gradient boosting over the declarative features, with conformal calibration.

Two engines fit the per-quantile regressors: LightGBM (objective ``quantile``, the default) and
scikit-learn's HistGradientBoosting (loss ``quantile``); the parameters are named once and
mapped onto each engine's own. One model learns every series (the series id is a feature,
values are divided by each series' trailing mean). Horizons are forecast directly:
``multi_horizon="stacked"`` fits one regressor per quantile with the horizon as a feature,
``"per-horizon"`` one regressor per (horizon, quantile). When ``calibration_window`` is set, the
most recent window of the training data is held out and used to calibrate each quantile by split
conformal prediction. ``target="window"`` also forecasts the quantiles of the largest value over
the whole window of horizons (the window target of :mod:`forecaster.models.base`), from one row
per origin, calibrated on the same held-out window against its own target.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from forecaster.calibration import ConformalCalibrator
from forecaster.duration import parse_duration
from forecaster.exceptions import (
    ConfigError,
    NotEnoughHistoryError,
    check_positive,
    check_whole,
    shown,
)
from forecaster.features import (
    FeatureConfig,
    FeatureMatrix,
    build_features,
    target_values,
    window_targets,
    with_seasonal_windows,
)
from forecaster.models.base import BaseForecaster
from forecaster.panel import Panel

logger = logging.getLogger(__name__)

MULTI_HORIZON = ("stacked", "per-horizon")
BASELINES = ("last-value", "none")
# Whole-number parameters of the boosting and the least each takes
WHOLE_PARAMS = {
    "n_estimators": 1,
    "num_leaves": 2,
    "min_child_samples": 1,
    "max_train_rows": 1,
    "n_jobs": 1,
}
MAX_SEED = 2**31 - 1
WINDOW_MODELS = ("direct", "shift")


def _lightgbm(model: QuantileGradientBoosting, quantile: float, seed: int) -> Any:
    from lightgbm import LGBMRegressor

    return LGBMRegressor(
        objective="quantile",
        alpha=quantile,
        n_estimators=model.n_estimators,
        learning_rate=model.learning_rate,
        num_leaves=model.num_leaves,
        min_child_samples=model.min_child_samples,
        subsample=0.8,
        subsample_freq=1,
        colsample_bytree=0.8,
        random_state=seed,
        n_jobs=1,  # regressors run side by side instead (QuantileGradientBoosting.n_jobs)
        verbose=-1,
    )


def _hist_gbm(model: QuantileGradientBoosting, quantile: float, seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(
        loss="quantile",
        quantile=quantile,
        max_iter=model.n_estimators,
        learning_rate=model.learning_rate,
        max_leaf_nodes=model.num_leaves,
        min_samples_leaf=model.min_child_samples,
        categorical_features=[0],  # the series code
        random_state=seed,
    )


ENGINES: dict[str, Callable[[QuantileGradientBoosting, float, int], Any]] = {
    "lightgbm": _lightgbm,
    "hist-gbm": _hist_gbm,
}


K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def _one_openmp_thread() -> None:
    """Hold OpenMP to one thread in the calling thread (a setting of its own), for good: a
    worker thread of :meth:`QuantileGradientBoosting._side_by_side`, which ends with its pool.
    Once per thread: the call inspects every loaded library (milliseconds), and a plan of
    every quantile would pay it per regressor."""
    threadpool_limits(1, user_api="openmp")


def _fitted(regressor: Any, X: np.ndarray, y: np.ndarray, rows: np.ndarray) -> Any:
    """``regressor`` fitted on ``rows`` of ``X`` and ``y``, copied out here: in a job, so that
    only the jobs running hold their copies."""
    return regressor.fit(X[rows], y[rows])


def _predicted(regressor: Any, X: np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
    """``regressor``'s forecasts of ``rows`` of ``X``, copied out in the job (:func:`_fitted`)."""
    values: np.ndarray = regressor.predict(X[rows])
    return values


class SeedAverage:
    """One quantile's regressors of the same engine fitted with different seeds; predicts
    their mean.

    A booster that samples rows and features draws a different forecast from each seed; on
    bursty traffic the plan sized on one draw can hold the SLO or miss it by luck. The mean of
    a few draws is steadier, and conformal calibration then sizes its offsets on the mean.
    """

    def __init__(self, members: Sequence[Any]) -> None:
        self.members = list(members)

    def fit(self, X: np.ndarray, y: np.ndarray) -> SeedAverage:
        for member in self.members:
            member.fit(X, y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        mean: np.ndarray = np.mean([member.predict(X) for member in self.members], axis=0)
        return mean


class QuantileGradientBoosting(BaseForecaster):
    """Global gradient-boosted quantile model, one regressor per quantile (and per horizon).

    Parameters
    ----------
    horizons
        Horizons in grid cells, sorted.
    quantiles
        Quantile levels in (0, 1), sorted.
    features
        Feature declaration (default :class:`~forecaster.features.FeatureConfig`).
    engine
        ``lightgbm`` or ``hist-gbm`` (scikit-learn's HistGradientBoostingRegressor).
    multi_horizon
        ``stacked`` (horizon as a feature) or ``per-horizon`` (one regressor per horizon).
    target
        ``horizon``: each horizon's value; ``window``: also the largest value over cells
        ``min(horizons) .. max(horizons)`` after the origin (:meth:`predict_window`).
    window_model
        How the window target is forecast, from the largest of the (calibrated) per-horizon
        quantiles: ``direct``: one regressor per quantile learns how far the window's maximum
        lies above it (features described at the window's first horizon, plus the window's
        maximum one season before); ``shift``: it is used as is. Either way, split conformal
        on the window's own target then calibrates it.
    baseline
        ``last-value``: the regressors learn the change from the value at the origin (both
        divided by the scale), so trees refine a strong forecast instead of rebuilding the
        level from coarse leaves; ``none``: they learn the scaled value itself.
    calibration_window
        Most recent span of the training data held out for conformal calibration, or None.
        A window holding fewer than 60 forecast origins (a day of half-hour cells) cannot
        calibrate: the fit then keeps its raw quantiles and logs a warning.
    refit
        After calibrating, fit the regressors again on all of the training data, the
        calibration window included, and keep the offsets learned out of sample on it less
        the held-out model's median error there (its bias, which the refitted regressors have
        learned; the ``shift`` window's offsets, with no regressor, stay whole): the model
        then knows the latest days (a level shift three days old) at the price of a second
        fit.
    max_train_rows
        Training rows are sampled down to this many (seeded) to bound the fit time; beyond
        twice as many, the training and the calibration origins are sampled before any
        feature is built.
    n_estimators, learning_rate, num_leaves, min_child_samples
        Boosting rounds, shrinkage, leaves per tree and fewest rows per leaf (HistGradientBoosting:
        ``max_iter``, ``learning_rate``, ``max_leaf_nodes``, ``min_samples_leaf``).
    random_state
        Seed of the row sample and of the engine.
    n_seeds
        Regressors fitted per quantile (and horizon), each with its own engine seed, whose
        forecasts are averaged before calibration (:class:`SeedAverage`): seeds
        ``random_state * n_seeds`` onwards, so 1 is the single regressor of ``random_state``
        and two random states never share a seed. Costs ``n_seeds`` times the boosting; the
        row sample is drawn once, from ``random_state``.
    n_jobs
        Regressors fitted (and predicting) at once, on threads, each on one thread of its
        engine: the model is the same for any ``n_jobs`` (LightGBM's own threads promise that
        only with its slower ``deterministic`` mode), and as fast as the engine's threads on
        a fit of many quantiles. One by default: walk-forward runs parallelize across models
        or workloads instead; the training job sets it to the CPUs it may use.

    Examples
    --------
    >>> from forecaster.scenarios import steady_diurnal
    >>> frame = steady_diurnal(days=10, step=300, seed=1)
    >>> model = QuantileGradientBoosting(horizons=(1, 2), quantiles=(0.5, 0.9), n_estimators=20)
    >>> forecast = model.fit(frame).predict(frame)
    >>> list(forecast.columns)
    ['series', 'origin', 'target_time', 'horizon', 'q0.5', 'q0.9']
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        features: FeatureConfig | None = None,
        engine: str = "lightgbm",
        multi_horizon: str = "stacked",
        target: str = "horizon",
        window_model: str = "direct",
        baseline: str = "last-value",
        calibration_window: str | None = "3d",
        refit: bool = False,
        max_train_rows: int = 200_000,
        n_estimators: int = 200,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 40,
        random_state: int = 0,
        n_seeds: int = 1,
        n_jobs: int = 1,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.features = features
        self.engine = engine
        self.multi_horizon = multi_horizon
        self.target = target
        self.window_model = window_model
        self.baseline = baseline
        self.calibration_window = calibration_window
        self.refit = refit
        self.max_train_rows = max_train_rows
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.random_state = random_state
        self.n_seeds = n_seeds
        self.n_jobs = n_jobs

    def _check_params(self) -> None:
        super()._check_params()
        if self.engine not in ENGINES:
            raise ConfigError(f"`engine` must be one of {list(ENGINES)}, got {self.engine!r}")
        if self.baseline not in BASELINES:
            raise ConfigError(f"`baseline` must be one of {list(BASELINES)}, got {self.baseline!r}")
        if self.window_model not in WINDOW_MODELS:
            raise ConfigError(
                f"`window_model` must be one of {list(WINDOW_MODELS)}, got {self.window_model!r}"
            )
        if self.multi_horizon not in MULTI_HORIZON:
            raise ConfigError(
                f"`multi_horizon` must be one of {list(MULTI_HORIZON)}, got {self.multi_horizon!r}"
            )
        check_whole("n_seeds", self.n_seeds, 1)
        for name, least in WHOLE_PARAMS.items():
            check_whole(name, getattr(self, name), least)
        # the seeds of n_seeds boosters, random_state * n_seeds onwards, are 32-bit
        check_whole("random_state", self.random_state, 0, (MAX_SEED + 1) // self.n_seeds - 1)
        check_positive("learning_rate", self.learning_rate)
        if not isinstance(self.refit, bool):
            raise ConfigError(f"`refit` must be true or false, got {shown(self.refit)}")
        if self.calibration_window is not None:
            parse_duration(self.calibration_window, name="calibration_window")

    def _fit_panel(self, panel: Panel) -> None:
        self.features_ = self.features or FeatureConfig()
        origins = self._training_origins(panel, self.horizons)
        train, calibration = self._split(panel, origins)
        train = self._sampled_origins(train)
        if calibration is not None:  # conformal quantiles need rows, not every origin
            calibration = self._sampled_origins(calibration)
        matrix = self._fit_regressors(panel, train)
        self.calibrator_: ConformalCalibrator | None = None
        if calibration is not None:
            cal = build_features(
                panel, calibration, self.horizons, self.features_, self._codes(panel)
            )
            actual = target_values(panel, cal) / cal.scale
            self.calibrator_ = self._calibrate(actual, self._raw_predict(cal), cal)
        self.window_regressors_: dict[float, Any] = {}
        self.window_calibrator_: ConformalCalibrator | None = None
        if self.window_span is not None:
            self._fit_window(panel, train, calibration, matrix)
        if self.refit and calibration is not None:
            # The regressors learn the calibration window too, so the served model has seen
            # the latest regime; it has then also learned the held-out model's bias there (a
            # level shift), and offsets kept whole would correct for that bias twice. So do
            # the direct window regressors; the shift model's window offsets stay whole, their
            # median part being the window maximum's distance above the largest per-horizon
            # quantile, which no refit learns.
            direct = self.window_span is not None and self.window_model == "direct"
            if self.calibrator_ is not None:
                self.calibrator_ = self.calibrator_.unbiased()
            if direct and self.window_calibrator_ is not None:
                self.window_calibrator_ = self.window_calibrator_.unbiased()
            everything = self._sampled_origins(list(origins))
            matrix = self._fit_regressors(panel, everything)
            if direct:
                self._fit_window_regressors(panel, everything, matrix)

    def _fit_regressors(self, panel: Panel, origins: Sequence[np.ndarray]) -> FeatureMatrix:
        """The per-horizon regressors on ``origins``; returns their feature rows."""
        matrix = build_features(panel, origins, self.horizons, self.features_, self._codes(panel))
        ratio = target_values(panel, matrix) / matrix.scale - self._anchor(matrix)
        rows = self._training_rows(ratio, 10 * len(self.horizons))
        # A feature never observed in training (a 7-day lag on 5 days of data) carries nothing,
        # and some regressors refuse all-missing columns.
        self.columns_used_ = np.flatnonzero(np.isfinite(matrix.X[rows]).any(axis=0))
        self.feature_names_ = tuple(matrix.names[i] for i in self.columns_used_)
        X = matrix.X[:, self.columns_used_]
        self.regressors_ = self._side_by_side(
            {
                key: partial(_fitted, self._regressor(q), X, ratio, sel)
                for key, q, sel in self._groups(matrix.horizon, rows)
            }
        )
        return matrix

    def _regressor(self, quantile: float) -> Any:
        """An unfitted regressor of ``quantile``: the engine's, or the average of
        ``n_seeds`` of them."""
        engine = ENGINES[self.engine]
        if self.n_seeds == 1:
            return engine(self, quantile, self.random_state)
        first = self.random_state * self.n_seeds
        seeds = range(first, first + self.n_seeds)
        return SeedAverage([engine(self, quantile, seed) for seed in seeds])

    def _sampled_origins(self, origins: list[np.ndarray]) -> list[np.ndarray]:
        """``origins`` (training or calibration), or a seeded sample of them, uniform over
        every series' cells, when there are more than twice the origins whose rows fill
        ``max_train_rows`` (a row per horizon, and one per origin for the window target): so
        many rows still leave the fit and the conformal quantiles ``max_train_rows`` with an
        observed target, and a fleet's features and calibration predictions then cost what
        they use, not its whole history times its horizons."""
        per_origin = 1 if self.window_span is not None else len(self.horizons)
        wanted = -(-2 * self.max_train_rows // per_origin)
        counts = np.array([len(cells) for cells in origins], dtype=np.int64)
        if counts.sum() <= wanted:
            return origins
        picked = np.sort(
            np.random.default_rng(self.random_state).choice(counts.sum(), wanted, replace=False)
        )
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        parts = np.split(picked, np.searchsorted(picked, offsets[1:]))
        return [
            cells[part - offset]
            for cells, part, offset in zip(origins, parts, offsets, strict=True)
        ]

    def _training_rows(self, ratio: np.ndarray, fewest: int) -> np.ndarray:
        """Rows with an observed target, sampled down to ``max_train_rows`` (seeded)."""
        rows = np.flatnonzero(np.isfinite(ratio))
        if rows.size < fewest:
            raise NotEnoughHistoryError(
                f"only {rows.size} training rows with an observed target; need more history"
            )
        rng = np.random.default_rng(self.random_state)
        if rows.size > self.max_train_rows:
            rows = np.sort(rng.choice(rows, self.max_train_rows, replace=False))
        return rows

    def _calibrate(
        self, actual: np.ndarray, raw: np.ndarray, matrix: FeatureMatrix
    ) -> ConformalCalibrator:
        """Conformal offsets per horizon from scaled targets and raw forecasts."""
        order = np.argsort(matrix.origin, kind="stable")  # conformal halves are in time order
        return ConformalCalibrator(self.quantiles).fit(
            actual[order], raw[order], matrix.horizon[order]
        )

    def _window_matrix(self, panel: Panel, origins: Sequence[np.ndarray]) -> FeatureMatrix:
        """One feature row per origin, described at the window's first horizon, with the
        window's maximum one season before."""
        first, last = self._span()
        matrix = build_features(panel, origins, (first,), self.features_, self._codes(panel))
        return with_seasonal_windows(panel, matrix, first, last, self.features_)

    def _span(self) -> tuple[int, int]:
        span = self.window_span
        if span is None:
            raise ConfigError("this model has no window target (`target='window'`)")
        return span

    def _fit_window(
        self,
        panel: Panel,
        train: Sequence[np.ndarray],
        calibration: Sequence[np.ndarray] | None,
        horizons: FeatureMatrix,
    ) -> None:
        """The window target's regressors, on origins whose windows end before the
        calibration window (``horizons``: their per-horizon feature rows), then its
        conformal offsets on that window's own targets."""
        first, last = self._span()
        if self.window_model == "direct":
            self._fit_window_regressors(panel, train, horizons)
        if calibration is not None:
            cal = self._window_matrix(panel, calibration)
            actual = window_targets(panel, cal, first, last) / cal.scale
            # The window's last `last` origins have no complete target yet: on a short
            # series too few may remain, and the window target then stays uncalibrated.
            if np.isfinite(actual).sum() >= ConformalCalibrator(self.quantiles).min_rows:
                raw = self._raw_window(panel, calibration, cal)
                self.window_calibrator_ = self._calibrate(actual, raw, cal)

    def _fit_window_regressors(
        self, panel: Panel, origins: Sequence[np.ndarray], horizons: FeatureMatrix
    ) -> None:
        """The direct window regressors on ``origins`` (``horizons``: their per-horizon
        feature rows): how far the window's maximum lies above the largest quantile."""
        first, last = self._span()
        matrix = self._window_matrix(panel, origins)
        target = window_targets(panel, matrix, first, last) / matrix.scale
        base = self._horizon_max(horizons)
        rows = self._training_rows(target, 10)
        self.window_columns_used_ = np.flatnonzero(np.isfinite(matrix.X[rows]).any(axis=0))
        X = matrix.X[rows][:, self.window_columns_used_]
        self.window_regressors_ = self._side_by_side(
            {
                q: partial(self._regressor(q).fit, X, target[rows] - base[rows, j])
                for j, q in enumerate(self.quantiles)
            }
        )

    def _horizon_max(self, matrix: FeatureMatrix) -> np.ndarray:
        """Per origin of a per-horizon feature matrix, the largest calibrated quantile over
        the horizons, scaled (an origin's rows share one scale)."""
        scaled = self._raw_predict(matrix)
        if self.calibrator_ is not None:
            scaled = self.calibrator_.transform(scaled, matrix.horizon)
        largest: np.ndarray = scaled.reshape(-1, len(self.horizons), len(self.quantiles)).max(
            axis=1
        )
        return largest

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
        train, calibration = [], []
        for values, cells_s in zip(panel.values, origins, strict=True):
            cutoff = len(values) - cells
            train.append(cells_s[cells_s + max(self.horizons) < cutoff])
            calibration.append(cells_s[cells_s >= cutoff])
        # Origins of the window's last horizon cells have no target yet: on a short series
        # (an hour at 10 s steps, a 5-minute lead) too few may remain to calibrate on.
        held, needed = (
            sum(len(c) for c in calibration),
            ConformalCalibrator(self.quantiles).min_rows,
        )
        if held < needed:
            # Said once per fit: a configured window that calibrates nothing is not silent.
            logger.warning(
                "calibration_window %r holds %d forecast origins, fewer than the %d split "
                "conformal needs: this fit's quantiles are uncalibrated",
                self.calibration_window,
                held,
                needed,
            )
            return list(origins), None
        return train, calibration

    def _groups(
        self, horizon: np.ndarray, rows: np.ndarray
    ) -> list[tuple[tuple[int | None, float], float, np.ndarray]]:
        if self.multi_horizon == "stacked":
            return [((None, q), q, rows) for q in self.quantiles]
        return [
            ((h, q), q, rows[horizon[rows] == h]) for h in self.horizons for q in self.quantiles
        ]

    def _anchor(self, matrix: FeatureMatrix) -> np.ndarray:
        """What the regressors' targets are relative to, in scaled units, per row."""
        if self.baseline == "none":
            return np.zeros(len(matrix.X))
        if "lag_0" not in matrix.names:
            raise ConfigError("`baseline='last-value'` needs lag 0 in the feature `lags`")
        last = matrix.X[:, matrix.names.index("lag_0")].astype(float)
        # A gap at the origin: the scale is the trailing mean, so 1 is the recent level.
        return np.where(np.isfinite(last), last, 1.0)

    def _raw_predict(self, matrix: FeatureMatrix) -> np.ndarray:
        return self._anchor(matrix)[:, None] + self._regressor_outputs(matrix)

    def _regressor_outputs(self, matrix: FeatureMatrix) -> np.ndarray:
        X = matrix.X[:, self.columns_used_]
        out = np.zeros((len(X), len(self.quantiles)))
        # Each regressor's rows: all of them (stacked), or its horizon's.
        rows: dict[int | None, slice | np.ndarray] = (
            {None: slice(None)}
            if self.multi_horizon == "stacked"
            else {h: np.flatnonzero(matrix.horizon == h) for h in self.horizons}
        )
        predicted = self._side_by_side(
            {
                (h, j): partial(_predicted, self.regressors_[(h, q)], X, sel)
                for h, sel in rows.items()
                if isinstance(sel, slice) or sel.size
                for j, q in enumerate(self.quantiles)
            }
        )
        for (h, j), values in predicted.items():
            out[rows[h], j] = values
        return out

    def _side_by_side(self, calls: Mapping[K, Callable[[], T]]) -> dict[K, T]:
        """Each of ``calls`` (a regressor's fit or forecast), :attr:`n_jobs` at a time on
        threads (the engines release the GIL), each engine on one OpenMP thread."""
        if self.n_jobs == 1:
            with threadpool_limits(1, user_api="openmp"):
                return {key: call() for key, call in calls.items()}
        with ThreadPoolExecutor(
            self.n_jobs, thread_name_prefix="regressor", initializer=_one_openmp_thread
        ) as pool:
            futures = {key: pool.submit(call) for key, call in calls.items()}
            return {key: future.result() for key, future in futures.items()}

    def _raw_window(
        self, panel: Panel, origins: Sequence[np.ndarray], matrix: FeatureMatrix
    ) -> np.ndarray:
        """Uncalibrated scaled window quantiles of ``origins`` (``matrix``: their window rows)."""
        horizons = build_features(panel, origins, self.horizons, self.features_, self._codes(panel))
        base = self._horizon_max(horizons)
        if self.window_model == "shift":
            return base
        X = matrix.X[:, self.window_columns_used_]
        outputs = self._side_by_side(
            {q: partial(self.window_regressors_[q].predict, X) for q in self.quantiles}
        )
        return base + np.column_stack([outputs[q] for q in self.quantiles])

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        matrix = build_features(panel, origins, self.horizons, self.features_, self._codes(panel))
        return self._unscaled(self._raw_predict(matrix), matrix, self.calibrator_)

    def _predict_window_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        matrix = self._window_matrix(panel, origins)
        raw = self._raw_window(panel, origins, matrix)
        return self._unscaled(raw, matrix, self.window_calibrator_)

    @staticmethod
    def _unscaled(
        scaled: np.ndarray, matrix: FeatureMatrix, calibrator: ConformalCalibrator | None
    ) -> np.ndarray:
        if calibrator is not None:
            scaled = calibrator.transform(scaled, matrix.horizon)
        return scaled * matrix.scale[:, None]

    @property
    def calibration_report(self) -> Any:
        """Coverage before and after calibration per quantile (None when not calibrated)."""
        return None if self.calibrator_ is None else self.calibrator_.report_

    @property
    def window_calibration_report(self) -> Any:
        """The same for the window target (None without one or when not calibrated)."""
        calibrator = getattr(self, "window_calibrator_", None)
        return None if calibrator is None else calibrator.report_
