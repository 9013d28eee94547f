"""Baselines: last value, EWMA and seasonal naive, with empirical quantiles.

Each baseline makes a point forecast and turns it into quantiles by adding the empirical
quantiles of its own past errors at the same horizon, measured relative to the series' trailing
mean so the band scales with the level. These are the forecasts any serious model must beat.

With ``target="window"`` a baseline also forecasts the largest value over its window of
horizons: the largest of its point forecasts over the window's cells (for seasonal naive, the
largest value of the same window one season before) plus the empirical quantiles of that
forecast's own past errors against the window's maximum.

How fast an EWMA level follows the data is a property of the series, as in exponential
smoothing, where the smoothing constant is fitted: with ``halflife="auto"`` (the default of
``ewma`` and ``mstl``) each series gets the half-life of :data:`HALFLIFE_CELLS` whose forecasts
at the model's horizons had the lowest mean absolute error over its training history
(:class:`SmoothedLevel`). The level reads only the past, so those errors are forecasts'
errors. No fixed half-life suits the public traces: a half-hour taxi series wants the last
cell, a noisy 5-minute CPU series hours (``benchmarks/results/forecast_accuracy.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, shown
from forecaster.features import take, trailing_scale, window_target
from forecaster.models.base import BaseForecaster
from forecaster.panel import Panel

AUTO = "auto"
# The half-lives ``auto`` chooses from, in cells of the series' grid: from the last value
# (half a cell) to a smoothing over hours of 5-minute cells.
HALFLIFE_CELLS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# The half-life of a series ``auto`` did not see in fit.
UNSEEN_HALFLIFE = "1h"
UNSEEN_SECONDS = float(parse_duration(UNSEEN_HALFLIFE))


def forward_fill(values: np.ndarray) -> np.ndarray:
    """Carry the last observed value over NaN cells (leading NaN stay), as pandas' ``ffill``
    does, in numpy: a plan calls it once per series, and at 10,000 series a pandas Series
    each cost seconds.

    >>> forward_fill(np.array([np.nan, 1.0, np.nan, 3.0, np.nan])).tolist()
    [nan, 1.0, 1.0, 3.0, 3.0]
    """
    values = np.asarray(values, dtype=float)
    last = np.where(np.isnan(values), 0, np.arange(len(values)))
    np.maximum.accumulate(last, out=last)
    return values[last]


def ewma(values: np.ndarray, halflife: str, step: int, name: str = "halflife") -> np.ndarray:
    """Exponentially weighted mean of ``values`` after each cell, gaps skipped, with a
    half-life of ``halflife`` (a duration; at least half a cell)."""
    return ewma_cells(values, parse_duration(halflife, name=name) / step)


def ewma_cells(values: np.ndarray, cells: float) -> np.ndarray:
    """:func:`ewma` with the half-life in cells (at least half a cell)."""
    smoothed: np.ndarray = (
        pd.Series(values).ewm(halflife=max(cells, 0.5), ignore_na=True).mean().to_numpy()
    )
    return smoothed


class PointBaseline(BaseForecaster):
    """Shared machinery of the baselines; subclasses define :meth:`point`.

    Every baseline takes ``target`` (``horizon`` or ``window``, see
    :mod:`forecaster.models.base`).
    """

    scale_window: str

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        """Point forecast for series ``s`` at ``origins + horizons`` (cells, same length)."""
        raise NotImplementedError

    def _rows(
        self, panel: Panel, origins: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Point forecast, scale, horizon and observed target of every (origin, horizon) row."""
        horizons = np.asarray(self.horizons, dtype=np.int64)
        window = self._scale_cells(panel)
        parts = []
        for s, cells in enumerate(origins):
            o = np.repeat(np.asarray(cells, dtype=np.int64), len(horizons))
            h = np.tile(horizons, len(cells))
            scale = trailing_scale(panel.values[s], window, o)
            parts.append((self.point(panel, s, o, h), scale, h, take(panel.values[s], o + h)))
        point, scale, horizon, actual = (
            np.concatenate(column) for column in zip(*parts, strict=True)
        )
        return point, scale, horizon, actual

    def _scale_cells(self, panel: Panel) -> int:
        return max(1, round(parse_duration(self.scale_window) / panel.step))

    def _window_rows(
        self, panel: Panel, origins: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Window point forecast (the largest point forecast over the window's cells), scale
        and observed window maximum of every origin."""
        span = self.window_span
        assert span is not None  # called for window targets only
        cells = np.arange(span[0], span[1] + 1, dtype=np.int64)
        window = self._scale_cells(panel)
        parts = []
        for s, at in enumerate(origins):
            at = np.asarray(at, dtype=np.int64)
            point = self.point(panel, s, np.repeat(at, len(cells)), np.tile(cells, len(at)))
            parts.append(
                (
                    np.fmax.reduce(point.reshape(len(at), len(cells)), axis=1, initial=np.nan),
                    trailing_scale(panel.values[s], window, at),
                    window_target(panel.values[s], at, *span),
                )
            )
        point, scale, actual = (np.concatenate(column) for column in zip(*parts, strict=True))
        return point, scale, actual

    def _fit_panel(self, panel: Panel) -> None:
        point, scale, horizon, actual = self._rows(
            panel, self._training_origins(panel, self.horizons)
        )
        errors = (actual - point) / scale
        table = np.zeros((len(self.horizons), len(self.quantiles)))
        for i, h in enumerate(self.horizons):
            usable = errors[(horizon == h) & np.isfinite(errors)]
            if usable.size:
                table[i] = np.quantile(usable, self.quantiles)
        self.error_quantiles_ = table
        if self.window_span is not None:
            point, scale, actual = self._window_rows(
                panel, self._training_origins(panel, self.horizons)
            )
            errors = (actual - point) / scale
            usable = errors[np.isfinite(errors)]
            self.window_error_quantiles_ = (
                np.quantile(usable, self.quantiles)
                if usable.size
                else np.zeros(len(self.quantiles))
            )

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        point, scale, horizon, _ = self._rows(panel, origins)
        position = np.searchsorted(np.asarray(self.horizons), horizon)
        return point[:, None] + scale[:, None] * self.error_quantiles_[position]

    def _predict_window_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        point, scale, _ = self._window_rows(panel, origins)
        return point[:, None] + scale[:, None] * self.window_error_quantiles_[None, :]


class LastValue(PointBaseline):
    """The last observed value, held."""

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        scale_window: str = "1d",
        target: str = "horizon",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.scale_window = scale_window
        self.target = target

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        return forward_fill(panel.values[s])[origins]


class SmoothedLevel(PointBaseline):
    """A baseline built on an EWMA level whose half-life is fixed or, with ``halflife="auto"``,
    fitted per series (``halflives_``: seconds by series; a series unseen in fit gets
    :data:`UNSEEN_HALFLIFE`). The level smooths the series less its :meth:`seasonal` part
    (none here), which the forecast adds back at the target time."""

    halflife: str

    def _check_params(self) -> None:
        super()._check_params()
        if self.halflife != AUTO:
            try:
                parse_duration(self.halflife, name="halflife")
            except ConfigError:
                raise ConfigError(
                    f"`halflife` must be a duration such as 30m, or {AUTO!r} to fit one per "
                    f"series, got {shown(self.halflife)}"
                ) from None

    def seasonal(self, panel: Panel, s: int, cells: np.ndarray) -> np.ndarray:
        """The seasonal part of series ``s`` at grid ``cells``: none for a plain level."""
        return np.zeros(len(cells))

    def _fit_panel(self, panel: Panel) -> None:
        self.halflives_: dict[str, float] = {}
        if self.halflife == AUTO:
            self.halflives_ = {
                name: self._fitted_halflife(panel, s) for s, name in enumerate(panel.names)
            }
        super()._fit_panel(panel)

    def _fitted_halflife(self, panel: Panel, s: int) -> float:
        """The half-life (seconds) of :data:`HALFLIFE_CELLS` with the lowest mean absolute
        error of the forecasts of series ``s`` at the model's horizons, over its history
        (:data:`UNSEEN_HALFLIFE` when no forecast there has a target)."""
        values = panel.values[s]
        season = self.seasonal(panel, s, np.arange(len(values)))
        horizons = np.asarray(self.horizons, dtype=np.int64)
        origins = np.arange(max(0, len(values) - int(horizons.max())))
        targets = (origins[:, None] + horizons[None, :]).ravel()
        at = np.repeat(origins, len(horizons))
        errors = []
        for cells in HALFLIFE_CELLS:
            level = ewma_cells(values - season, cells)
            error = np.abs(values[targets] - level[at] - season[targets])
            finite = error[np.isfinite(error)]
            errors.append(finite.mean() if finite.size else np.inf)
        if not np.isfinite(errors).any():
            return UNSEEN_SECONDS
        return HALFLIFE_CELLS[int(np.argmin(errors))] * panel.step

    def _halflife_seconds(self, series: str) -> float:
        """The level's half-life of ``series``: the fixed one, else fitted, else the
        fallback."""
        if self.halflife != AUTO:
            return float(parse_duration(self.halflife, name="halflife"))
        return self.halflives_.get(series, UNSEEN_SECONDS)

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        values = panel.values[s]
        season = self.seasonal(panel, s, np.arange(len(values)))
        level = ewma_cells(values - season, self._halflife_seconds(panel.names[s]) / panel.step)
        return level[origins] + self.seasonal(panel, s, origins + horizons)


class EWMA(SmoothedLevel):
    """Exponentially weighted moving average at the origin, held over the horizon.

    Parameters
    ----------
    halflife
        Duration after which an observation's weight halves, or ``auto``: fitted per series
        (:class:`SmoothedLevel`).
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        halflife: str = AUTO,
        scale_window: str = "1d",
        target: str = "horizon",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.halflife = halflife
        self.scale_window = scale_window
        self.target = target


class SeasonalNaive(PointBaseline):
    """The value one season before the target time (the last value where that is unknown).

    Parameters
    ----------
    season
        ``1d`` for same time yesterday, ``7d`` for same time last week.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        season: str = "1d",
        scale_window: str = "1d",
        target: str = "horizon",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.season = season
        self.scale_window = scale_window
        self.target = target

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        filled = forward_fill(panel.values[s])
        cells = max(1, round(parse_duration(self.season, name="season") / panel.step))
        source = origins + horizons - cells
        # A horizon longer than the season would read the future; fall back to the last value.
        usable = (source >= 0) & (source <= origins)
        out = filled[origins].copy()
        out[usable] = filled[source[usable]]
        return np.where(np.isnan(out), filled[origins], out)
