"""Per-series combinations of registered models, weighted or selected on a validation window.

``fit`` carves the most recent ``validation_window`` off the training frame, fits every
candidate on the history before it, and forecasts every origin of the window from the whole
frame (a forecast at an origin reads only cells up to it, so nothing after the origin leaks
in). On those forecasts it learns, per series:

* ``method="weights"``: for each quantile, non-negative weights summing to one that minimise the
  pinball loss of the weighted forecast at that quantile (a small linear program: the pinball
  loss is piecewise linear in the weights);
* ``method="select"``: the one candidate whose forecast of what the plan sizes for, the largest
  demand over the window of horizons (:func:`forecaster.models.base.lead_window_forecast`: a
  window target where the candidate has one, else the largest of its per-horizon quantiles),
  has the lowest pinball loss at the series' own quantile (``taus``; the mean over the
  quantiles for a series without one), among the candidates whose forecast at that quantile
  (the top one without) covered the windows at least that quantile less
  :func:`coverage_slack` of the time (among all of them when none did).

The candidates are then refitted on the whole frame; those no series uses are dropped. A series
unseen in fit gets the weights averaged over the fitted series (``select``: the candidate most
series chose). Nothing after the end of the training frame is read: the weights are out of
sample for the validation window and the served models are fitted up to the end. Where a
candidate has a window target, the combination forecasts the window too (:meth:`predict_window`),
for every series: a series served per horizon gets the largest of its quantiles there.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Self

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.optimize import linprog
from sklearn.utils.validation import check_is_fitted

from forecaster.duration import parse_duration
from forecaster.exceptions import (
    ConfigError,
    DataValidationError,
    NotEnoughHistoryError,
    check_whole,
    shown,
)
from forecaster.features import FeatureConfig, window_target
from forecaster.frame import Columns
from forecaster.metrics import coverage, pinball_loss
from forecaster.models.base import BaseForecaster, Origins, planned_window, quantile_column
from forecaster.models.components import COMPONENTS
from forecaster.panel import Panel

logger = logging.getLogger(__name__)

METHODS = ("weights", "select")
# The window model with and without the hour's phase beside the decomposition: over plain
# LightGBM, weekly seasonal naive, EWMA and `mstl` (the earlier default) its q0.9 pinball loss
# fell on 7 of the 9 traces of benchmarks/forecast_accuracy.py (asg_cpu 28%, azure_vm 8%,
# nyc_taxi 5%, google_cluster 2%; the scenarios and the LLM trace 2% to 7%) and rose on two
# (twitter 0.5%, office-hours 6%).
DEFAULT_CANDIDATES = ("lightgbm-window", "lightgbm-window-hourly", "mstl")
# `auto` also weighs the window target: on a level shift it covers windows lightgbm does not,
# on the synthetic scenarios lightgbm's window forecast scores better
# (benchmarks/results/forecast_accuracy.md).
SELECT_CANDIDATES = ("lightgbm", "lightgbm-window", "seasonal-naive-weekly", "ewma", "mstl")
# How many standard errors under its quantile a candidate's coverage of the validation windows
# may fall and it still be picked (:func:`coverage_slack`).
COVERAGE_Z = 3.0
KEYS = ("origin", "horizon")
DEFAULT_VALIDATION, SHORT_SHARE = 86400.0, 0.25  # one day, or a quarter of a short history
# The fewest cells the default validation window spans: one day of 5-minute cells. A day of
# half-hour cells is 48 windows, too few to rank models by: on nyc_taxi's daily refits `auto`
# picked EWMA or `mstl` for a day on two of seven and lost 1.7x LightGBM's q0.9 pinball loss;
# over six days it serves `lightgbm-window` on each (benchmarks/results/forecast_accuracy.md).
MIN_VALIDATION_CELLS = 288


def pinball_weights(forecasts: np.ndarray, actual: np.ndarray, quantile: float) -> np.ndarray:
    """Non-negative weights summing to one that minimise the pinball loss at ``quantile`` of
    ``forecasts @ weights`` against ``actual`` (``forecasts``: rows x candidates).

    As a linear program: ``forecasts @ w + over - under = actual`` with ``w, over, under >= 0``,
    minimising ``quantile * over + (1 - quantile) * under`` summed over the rows.
    """
    n, k = forecasts.shape
    cost = np.concatenate([np.zeros(k), np.full(n, quantile), np.full(n, 1.0 - quantile)])
    identity = sparse.identity(n, format="csr")
    rows = sparse.hstack([sparse.csr_matrix(forecasts), identity, -identity])
    total = sparse.hstack([np.ones((1, k)), sparse.csr_matrix((1, 2 * n))])
    result = linprog(
        cost,
        A_eq=sparse.vstack([rows, total]).tocsr(),
        b_eq=np.concatenate([actual, [1.0]]),
        bounds=(0, None),
        method="highs",
    )
    if not result.success:  # numerically degenerate rows: fall back to equal weights
        logger.warning("combination weights: %s; using equal weights", result.message)
        return np.full(k, 1.0 / k)
    weights = np.clip(result.x[:k], 0.0, None)
    return weights / weights.sum()


def coverage_slack(level: float, windows: int) -> float:
    """How far under ``level`` a coverage measured on ``windows`` windows may fall by chance:
    :data:`COVERAGE_Z` standard errors of a binomial proportion. One day of 5-minute windows
    at q0.9 allows 0.053; the 48 windows of a day of half-hour cells allow 0.13 (a fixed 0.05
    passed over both LightGBM models on one nyc_taxi day in seven).

    >>> round(coverage_slack(0.9, 288), 3), round(coverage_slack(0.9, 48), 3)
    (0.053, 0.13)
    """
    return COVERAGE_Z * float(np.sqrt(level * (1.0 - level) / max(windows, 1)))


def select_candidate(losses: Sequence[float], shortfalls: Sequence[float], slack: float) -> int:
    """The candidate ``select`` picks: the lowest loss among those whose coverage fell short of
    their quantile by at most ``slack``, or among all when none did (the least short would be
    the one that over-provisions most, whatever its loss).

    >>> select_candidate([1.0, 2.0, 3.0], [0.20, 0.01, 0.0], slack=0.05)  # the first too rarely
    1
    >>> select_candidate([1.0, 2.0], [0.20, 0.10], slack=0.05)
    0
    """
    short = np.asarray(shortfalls, dtype=float)
    eligible = np.flatnonzero(short <= slack + 1e-12)
    if not eligible.size:
        eligible = np.arange(len(short))
    return int(eligible[np.argmin(np.asarray(losses, dtype=float)[eligible])])


def plan_forecast(
    model: BaseForecaster,
    forecast: pd.DataFrame,
    frame: pd.DataFrame,
    origins: Origins,
    span: tuple[int, int],
) -> pd.DataFrame:
    """What a plan over the horizons ``span`` sizes for from a fitted ``model``, whose
    per-horizon ``forecast`` of ``frame`` at ``origins`` is given (:func:`planned_window`):
    one row per (series, origin) with one ``q<level>`` column per quantile."""
    levels = [quantile_column(q) for q in model.quantiles]
    window = model.predict_window(frame, origins)
    planned = planned_window(
        forecast, window, model.window_span, span, model.columns_.id_col, levels
    )
    return planned.reset_index()


def window_actual(
    panel: Panel, origins: pd.DatetimeIndex, span: tuple[int, int], id_col: str
) -> pd.DataFrame:
    """The largest value over cells ``origin + span[0] .. origin + span[1]`` of every series
    of ``panel`` at ``origins`` (:func:`forecaster.features.window_target`): columns id,
    ``origin`` and ``actual``, NaN where the window holds no observation."""
    seconds = origins.as_unit("ns").asi8 // 10**9
    parts = []
    for s, values in enumerate(panel.values):
        cells = (seconds - panel.starts[s]) // panel.step
        inside = (cells >= 0) & (cells < len(values))
        parts.append(
            pd.DataFrame(
                {
                    id_col: panel.names[s],
                    "origin": origins[inside],
                    "actual": window_target(values, cells[inside], *span),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


class Combination(BaseForecaster):
    """Per-series weighting (or selection) of registered models.

    Parameters
    ----------
    horizons, quantiles
        As for every model; handed to every candidate.
    candidates
        Registered model names (at least one, no repeats, not a combination).
    method
        ``weights`` (pinball-optimal convex weights per quantile) or ``select`` (one model per
        series at its quantile).
    validation_window
        The most recent span of the training frame the weights are learned on; None: one day,
        or :data:`MIN_VALIDATION_CELLS` cells when that is longer (six days of half-hour
        cells), or a quarter of the history when that is shorter (hours of arrival logs).
    taus
        Series -> the quantile a ``select`` judges it at (its policy's tau); training sets it.
    candidate_params
        Candidate name -> its constructor arguments besides horizons and quantiles.
    features
        Handed to the candidates that take declared features; without such a candidate in
        use, what serving keeps history for (``features_``: the default declaration's week
        and a day when None).
    random_state
        Handed to the candidates that take a seed.
    max_origins
        The validation origins are thinned, evenly, to at most this many.
    max_rows
        The validation rows of one series and quantile the weights are fitted on are thinned,
        evenly, to at most this many (bounds the linear program).

    Examples
    --------
    >>> from forecaster.scenarios import steady_diurnal
    >>> frame = steady_diurnal(days=4, step=900, seed=1)
    >>> model = Combination(horizons=(1, 2), quantiles=(0.5, 0.9),
    ...                     candidates=("last-value", "seasonal-naive-daily")).fit(frame)
    >>> sorted(model.weights_) == sorted(frame["series"].unique())
    True
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        candidates: Sequence[str] = DEFAULT_CANDIDATES,
        method: str = "weights",
        validation_window: str | None = None,
        taus: Mapping[str, float] | None = None,
        candidate_params: Mapping[str, Mapping[str, Any]] | None = None,
        features: FeatureConfig | None = None,
        random_state: int = 0,
        max_origins: int = 720,
        max_rows: int = 3000,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.candidates = candidates
        self.method = method
        self.validation_window = validation_window
        self.taus = taus
        self.candidate_params = candidate_params
        self.features = features
        self.random_state = random_state
        self.max_origins = max_origins
        self.max_rows = max_rows

    # -- parameters ------------------------------------------------------------------------
    def _check_params(self) -> None:
        super()._check_params()
        if self.method not in METHODS:
            raise ConfigError(f"`method` must be one of {list(METHODS)}, got {shown(self.method)}")
        names = [self.candidates] if isinstance(self.candidates, str) else list(self.candidates)
        if isinstance(self.candidates, str) or not names or len(set(names)) != len(names):
            raise ConfigError(
                f"`candidates` must be a list of distinct model names, got {shown(self.candidates)}"
            )
        for name in names:
            if name not in COMPONENTS:
                raise ConfigError(
                    f"`candidates`: {shown(name)} is not a registered model to combine; "
                    f"registered: {', '.join(sorted(COMPONENTS))}"
                )
        unknown = sorted(set(self.candidate_params or {}) - set(names))
        if unknown:
            raise ConfigError(
                f"`candidate_params` names models that are not candidates: {shown(unknown)}"
            )
        if self.validation_window is not None:
            parse_duration(self.validation_window, name="validation_window")
        for field in ("max_origins", "max_rows"):
            check_whole(field, getattr(self, field), 2)
        for series, tau in (self.taus or {}).items():
            if not 0.0 < float(tau) < 1.0:
                raise ConfigError(f"`taus`: {series!r} must lie in (0, 1), got {shown(tau)}")

    def _candidate(self, name: str) -> BaseForecaster:
        accepted = COMPONENTS[name]().get_params()
        params = dict((self.candidate_params or {}).get(name, {}))
        if "features" in accepted and self.features is not None:
            params.setdefault("features", self.features)
        if "random_state" in accepted:
            params.setdefault("random_state", self.random_state)
        return COMPONENTS[name](horizons=self.horizons, quantiles=self.quantiles, **params)

    # -- fit -------------------------------------------------------------------------------
    def fit(
        self,
        frame: pd.DataFrame,
        *,
        id_col: str = "series",
        time_col: str = "timestamp",
        target_col: str = "value",
        covariates: Sequence[str] = (),
    ) -> Self:
        """Learn the weights on the last ``validation_window`` of ``frame``, then refit the
        candidates on all of it."""
        clean = self._training_frame(frame, Columns(id_col, time_col, target_col), covariates)
        names = list(self.candidates)
        origins, cut = self._validation_origins(clean)
        stacked, windows = self._validation_forecasts(clean, cut, origins, names)
        by_series = dict(iter(windows.groupby(id_col, sort=True)))
        self.weights_ = {
            str(series): self._series_weights(
                str(series), part, by_series.get(series, windows.iloc[:0]), names
            )
            for series, part in stacked.groupby(id_col, sort=True)
        }
        self.default_weights_ = self._default_weights(names)
        used = np.flatnonzero(
            np.any([w.sum(axis=1) > 0 for w in [*self.weights_.values(), self.default_weights_]], 0)
        )
        self.models_ = {
            names[k]: self._candidate(names[k]).fit(clean, **self._fit_columns()) for k in used
        }
        self.names_ = tuple(names)
        # The history serving keeps per series follows the declared features: those of the
        # boosting candidate in use, else the configured (or default) ones, a week and a day,
        # which covers every baseline's season and scale window too.
        declared = [m.features_ for m in self.models_.values() if hasattr(m, "features_")]
        self.features_ = declared[0] if declared else (self.features or FeatureConfig())
        return self

    def _fit_columns(self) -> dict[str, Any]:
        c = self.columns_
        return {
            "id_col": c.id_col,
            "time_col": c.time_col,
            "target_col": c.target_col,
            "covariates": self.covariates_,
        }

    def _validation_origins(self, clean: pd.DataFrame) -> tuple[pd.DatetimeIndex, pd.Timestamp]:
        time = clean[self.columns_.time_col]
        step = pd.Timedelta(seconds=self.step_)
        end = time.max()
        if self.validation_window is None:
            span = (end - time.min()).total_seconds()
            seconds = max(DEFAULT_VALIDATION, MIN_VALIDATION_CELLS * self.step_)
            cells = max(1, round(min(seconds, span * SHORT_SHARE) / self.step_))
        else:
            cells = max(1, round(parse_duration(self.validation_window) / self.step_))
        cut = end - (cells - 1) * step
        last = end - min(self.horizons) * step
        if last < cut or (time < cut).sum() < 2:
            raise NotEnoughHistoryError(
                f"the validation window {self._chosen_on()} ({cells} cells) leaves no "
                f"history to fit on or no origin with a target: the data spans {time.min()} .. "
                f"{end}"
            )
        origins = pd.date_range(cut, last, freq=step)
        keep = np.unique(np.linspace(0, len(origins) - 1, self.max_origins).round().astype(int))
        return origins[keep], cut

    def _chosen_on(self) -> str:
        """What the validation window decides, for messages (``auto`` is a combination too)."""
        return "its weights are fitted on" if self.method == "weights" else "its model is picked on"

    def _span(self) -> tuple[int, int]:
        """The window of horizons a plan sizes for: the combination's first to last."""
        return int(min(self.horizons)), int(max(self.horizons))

    def _validation_forecasts(
        self, clean: pd.DataFrame, cut: pd.Timestamp, origins: pd.DatetimeIndex, names: list[str]
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Every candidate's forecasts at the validation origins, fitted before ``cut``,
        beside the actual values: per horizon (columns id, origin, horizon,
        ``<q>@<candidate>``, actual) and of the window a plan sizes for (columns id, origin,
        ``<q>@<candidate>``, actual: the window's largest value)."""
        c = self.columns_
        before = clean[clean[c.time_col] < cut]
        merged: pd.DataFrame | None = None
        planned: pd.DataFrame | None = None
        for name in names:
            try:
                model = self._candidate(name).fit(before, **self._fit_columns())
            except DataValidationError as exc:
                raise type(exc)(
                    f"candidate {name!r} cannot be fitted on the history before the validation "
                    f"window ({cut}): {exc}"
                ) from exc
            forecast = model.predict(clean, origins)
            values = forecast[[c.id_col, *KEYS]].copy()
            plan = plan_forecast(model, forecast, clean, origins, self._span())
            window = plan[[c.id_col, "origin"]].copy()
            for q in self.quantiles:
                values[f"{quantile_column(q)}@{name}"] = forecast[quantile_column(q)].to_numpy()
                window[f"{quantile_column(q)}@{name}"] = plan[quantile_column(q)].to_numpy()
            if merged is None or planned is None:
                values["target_time"] = forecast["target_time"]
                merged, planned = values, window
            else:
                merged = merged.merge(values, on=[c.id_col, *KEYS], how="inner")
                planned = planned.merge(window, on=[c.id_col, "origin"], how="inner")
        assert merged is not None and planned is not None
        actual = clean[[c.id_col, c.time_col, c.target_col]].rename(
            columns={c.time_col: "target_time", c.target_col: "actual"}
        )
        joined = merged.merge(actual, on=[c.id_col, "target_time"], how="inner")
        numbers = joined.drop(columns=[c.id_col, "target_time", *KEYS]).to_numpy(dtype=float)
        out = joined.loc[np.isfinite(numbers).all(axis=1)]  # no target observed, or no forecast
        if out.empty:
            raise NotEnoughHistoryError(
                f"no target observed in the validation window {self._chosen_on()} ({cut} on) "
                "with a "
                "forecast of every candidate"
            )
        panel = Panel.from_frame(clean, self.step_, columns=c)
        maxima = window_actual(panel, origins, self._span(), c.id_col)
        windows = planned.merge(maxima, on=[c.id_col, "origin"], how="inner")
        numbers = windows.drop(columns=[c.id_col, "origin"]).to_numpy(dtype=float)
        return out, windows.loc[np.isfinite(numbers).all(axis=1)]

    def _series_weights(
        self, series: str, part: pd.DataFrame, windows: pd.DataFrame, names: list[str]
    ) -> np.ndarray:
        """Weights of series ``series``: candidates x quantiles. ``part`` holds its
        per-horizon validation forecasts, ``windows`` those of the plan's window."""
        keep = np.unique(np.linspace(0, len(part) - 1, min(self.max_rows, len(part))).astype(int))

        def forecasts(rows: pd.DataFrame, q: float) -> np.ndarray:
            columns = [f"{quantile_column(q)}@{name}" for name in names]
            return rows[columns].to_numpy(dtype=float)

        weights = np.zeros((len(names), len(self.quantiles)))
        if self.method == "weights":
            actual = part["actual"].to_numpy(dtype=float)
            for j, q in enumerate(self.quantiles):
                weights[:, j] = pinball_weights(forecasts(part, q)[keep], actual[keep], q)
            return weights
        # A series whose windows all run past the data is judged per horizon.
        rows = windows if len(windows) else part
        actual = rows["actual"].to_numpy(dtype=float)
        tau = (self.taus or {}).get(series)
        levels = list(self.quantiles) if tau is None else [self._nearest(float(tau))]
        losses = [
            float(np.mean([pinball_loss(actual, forecasts(rows, q)[:, k], q) for q in levels]))
            for k in range(len(names))
        ]
        # Coverage counts at the plan's quantile (or the top one forecast) only: a day of
        # overlapping windows is too alike for a median's coverage to tell models apart.
        top = max(levels)
        shortfalls = [top - coverage(actual, forecasts(rows, top)[:, k]) for k in range(len(names))]
        slack = coverage_slack(top, len(actual))
        weights[select_candidate(losses, shortfalls, slack)] = 1.0
        return weights

    def _nearest(self, tau: float) -> float:
        levels = np.asarray(self.quantiles, dtype=float)
        return float(levels[np.argmin(np.abs(levels - tau))])

    def _default_weights(self, names: list[str]) -> np.ndarray:
        fitted = list(self.weights_.values())
        if self.method == "weights":
            return np.mean(fitted, axis=0)
        votes = Counter(int(np.argmax(w[:, 0])) for w in fitted)
        weights = np.zeros((len(names), len(self.quantiles)))
        weights[min(votes, key=lambda k: (-votes[k], k))] = 1.0
        return weights

    # -- predict ---------------------------------------------------------------------------
    def predict(self, frame: pd.DataFrame, origins: Origins = None) -> pd.DataFrame:
        """The weighted quantile forecasts (see :meth:`BaseForecaster.predict`)."""
        check_is_fitted(self, "models_")
        forecasts = {name: m.predict(frame, origins) for name, m in self.models_.items()}
        return self._combine(forecasts, KEYS)

    @property
    def window_span(self) -> tuple[int, int] | None:
        """The combination's first and last horizon when a candidate has a window target,
        else None. Set by the candidates, not by the ones a fit picks: every model fitted from
        one configuration (each retrain of a backtest) forecasts the window alike."""
        names = [self.candidates] if isinstance(self.candidates, str) else list(self.candidates)
        windowed = any(name in COMPONENTS and self._candidate(name).window_span for name in names)
        return self._span() if windowed else None

    def predict_window(self, frame: pd.DataFrame, origins: Origins = None) -> pd.DataFrame | None:
        """The weighted forecasts of each window's largest value: every candidate's
        :func:`plan_forecast` (its window target, or the largest of its per-horizon
        quantiles). None when no candidate has a window target."""
        check_is_fitted(self, "models_")
        span = self.window_span
        if span is None:
            return None
        planned = {
            name: plan_forecast(m, m.predict(frame, origins), frame, origins, span)
            for name, m in self.models_.items()
        }
        return self._combine(planned, ("origin",))

    def _combine(self, forecasts: Mapping[str, pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
        """Each series' weighted sum of the candidates' ``forecasts`` (frames of the same rows,
        identified by the id column and ``keys``), sorted across the quantiles."""
        id_col = self.columns_.id_col
        first = next(iter(forecasts.values()))
        series = first[id_col].astype(str).to_numpy()
        for name, forecast in forecasts.items():
            # every candidate forecasts the same rows in the same order (one panel, one grid)
            if not first[[id_col, *keys]].equals(forecast[[id_col, *keys]]):
                raise DataValidationError(f"candidate {name!r} forecast other rows than the rest")
        index = {name: k for k, name in enumerate(self.names_)}
        weights = np.stack([self.weights_.get(s, self.default_weights_) for s in np.unique(series)])
        rows = np.searchsorted(np.unique(series), series)
        levels = [quantile_column(q) for q in self.quantiles]
        combined = np.zeros((len(first), len(levels)))
        for name, forecast in forecasts.items():
            w = weights[rows, index[name], :]
            # a candidate weighed 0 for a series adds nothing, not even its NaN
            combined += np.where(w > 0, w * forecast[levels].to_numpy(dtype=float), 0.0)
        out = first.copy()
        out[levels] = np.sort(np.clip(combined, 0.0, None), axis=1)
        return out

    # -- description -----------------------------------------------------------------------
    def served_by(self, series: str) -> str:
        """Which candidates forecast ``series``: one name, or ``name weight + ...`` (weights
        averaged over the quantiles, largest first)."""
        check_is_fitted(self, "models_")
        mean = self.weights_.get(series, self.default_weights_).mean(axis=1)
        order = [k for k in np.argsort(-mean, kind="stable") if mean[k] >= 0.005]
        if len(order) == 1:
            return self.names_[order[0]]
        return " + ".join(f"{self.names_[k]} {mean[k]:.2f}" for k in order)
