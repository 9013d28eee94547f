"""Baselines: last value, EWMA and seasonal naive, with empirical quantiles.

Each baseline makes a point forecast and turns it into quantiles by adding the empirical
quantiles of its own past errors at the same horizon, measured relative to the series' trailing
mean so the band scales with the level. These are the forecasts any serious model must beat.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.features import take, trailing_scale
from forecaster.models.base import BaseForecaster
from forecaster.panel import Panel


def forward_fill(values: np.ndarray) -> np.ndarray:
    """Carry the last observed value over NaN cells (leading NaN stay)."""
    return pd.Series(values).ffill().to_numpy()


class PointBaseline(BaseForecaster):
    """Shared machinery of the baselines; subclasses define :meth:`point`."""

    scale_window: str

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        """Point forecast for series ``s`` at ``origins + horizons`` (cells, same length)."""
        raise NotImplementedError

    def _rows(
        self, panel: Panel, origins: Sequence[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Point forecast, scale, horizon and observed target of every (origin, horizon) row."""
        horizons = np.asarray(self.horizons, dtype=np.int64)
        window = max(1, round(parse_duration(self.scale_window) / panel.step))
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

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        point, scale, horizon, _ = self._rows(panel, origins)
        position = np.searchsorted(np.asarray(self.horizons), horizon)
        return point[:, None] + scale[:, None] * self.error_quantiles_[position]


class LastValue(PointBaseline):
    """The last observed value, held."""

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        scale_window: str = "1d",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.scale_window = scale_window

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        return forward_fill(panel.values[s])[origins]


class EWMA(PointBaseline):
    """Exponentially weighted moving average at the origin, held over the horizon.

    Parameters
    ----------
    halflife
        Duration after which an observation's weight halves.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        halflife: str = "30m",
        scale_window: str = "1d",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.halflife = halflife
        self.scale_window = scale_window

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        cells = max(parse_duration(self.halflife, name="halflife") / panel.step, 0.5)
        smoothed = pd.Series(panel.values[s]).ewm(halflife=cells, ignore_na=True).mean()
        return smoothed.to_numpy()[origins]


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
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.season = season
        self.scale_window = scale_window

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        filled = forward_fill(panel.values[s])
        cells = max(1, round(parse_duration(self.season, name="season") / panel.step))
        source = origins + horizons - cells
        # A horizon longer than the season would read the future; fall back to the last value.
        usable = (source >= 0) & (source <= origins)
        out = filled[origins].copy()
        out[usable] = filled[source[usable]]
        return np.where(np.isnan(out), filled[origins], out)
