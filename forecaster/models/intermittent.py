"""Intermittent demand (TSB style): the probability of any demand times the size of demand.

For series that are mostly zero (sparse GPU inference requests), a level-based model smears
rare bursts into a small constant and divides by a level near zero. This model keeps the two
apart, as Teunter, Syntetos and Babai's method does: ``p``, an EWMA of whether a cell had any
demand, updated every cell; ``z``, an EWMA of the demand in the cells that had some, updated
only there. Quantile ``q`` of the demand at any horizon is 0 while ``q <= 1 - p`` (no demand is
that likely) and otherwise ``z`` times the ``(q - (1 - p)) / p`` quantile of the ratio of a
non-zero demand to the ``z`` before it. Ratios are taken only where ``z`` is above
:data:`forecaster.features.MIN_SCALE`, so nothing is divided by a level near zero; a series
with no demand yet forecasts zero.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from forecaster.duration import parse_duration
from forecaster.exceptions import check_whole
from forecaster.features import MIN_SCALE
from forecaster.models.base import BaseForecaster
from forecaster.models.baseline import ewma, forward_fill
from forecaster.panel import Panel

# Levels at which the ratio distribution is kept: enough to interpolate any quantile.
RATIO_LEVELS = np.linspace(0.0, 1.0, 101)


class Intermittent(BaseForecaster):
    """Occurrence probability times demand size, with an empirical size distribution.

    Parameters
    ----------
    horizons, quantiles
        As for every model (the forecast is the same at every horizon).
    occurrence_halflife
        Half-life of the EWMA of "any demand in the cell".
    size_halflife
        Half-life, in cells with demand, of the EWMA of the demand size.
    min_sizes
        Fewest non-zero cells for a series' own size distribution; with fewer, the one pooled
        over every series is used.

    Examples
    --------
    >>> import pandas as pd
    >>> times = pd.date_range("2024-01-01", periods=6, freq="1min", tz="UTC")
    >>> frame = pd.DataFrame({"series": "a", "timestamp": times, "value": 0.0})
    >>> forecast = Intermittent(quantiles=(0.5, 0.9)).fit(frame).predict(frame)
    >>> float(forecast[["q0.5", "q0.9"]].to_numpy().sum())  # no demand yet: zero, not NaN
    0.0
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        occurrence_halflife: str = "1h",
        size_halflife: str = "10m",
        min_sizes: int = 30,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.occurrence_halflife = occurrence_halflife
        self.size_halflife = size_halflife
        self.min_sizes = min_sizes

    def _check_params(self) -> None:
        super()._check_params()
        check_whole("min_sizes", self.min_sizes, 1)
        parse_duration(self.occurrence_halflife, name="occurrence_halflife")
        parse_duration(self.size_halflife, name="size_halflife")

    def state(self, values: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """``p`` and ``z`` after each cell of ``values`` (``z`` NaN before any demand)."""
        seen = np.isfinite(values)
        occurred = np.where(seen, values > 0, np.nan)
        p = ewma(occurred, self.occurrence_halflife, step, "occurrence_halflife")
        # The size EWMA moves only at cells with demand: its half-life counts those cells.
        sizes = np.where(seen & (values > 0), values, np.nan)
        z = forward_fill(ewma(sizes, self.size_halflife, step, "size_halflife"))
        return p, z

    def _ratios(self, values: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Non-zero demands divided by the ``z`` at each horizon's origin."""
        out = []
        for h in self.horizons:
            level, later = z[:-h], values[h:]
            usable = np.isfinite(level) & (level > MIN_SCALE) & np.isfinite(later) & (later > 0)
            out.append(later[usable] / level[usable])
        return np.concatenate(out) if out else np.zeros(0)

    def _fit_panel(self, panel: Panel) -> None:
        ratios = {}
        for s, values in enumerate(panel.values):
            _, z = self.state(values, panel.step)
            ratios[panel.names[s]] = self._ratios(values, z)
        pooled = np.concatenate(list(ratios.values()))
        self.pooled_ratios_ = np.quantile(pooled, RATIO_LEVELS) if pooled.size else None
        self.ratios_ = {
            name: np.quantile(r, RATIO_LEVELS)
            for name, r in ratios.items()
            if r.size >= self.min_sizes
        }

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        q = np.asarray(self.quantiles, dtype=float)
        rows = []
        for s, cells in enumerate(origins):
            p, z = self.state(panel.values[s], panel.step)
            table = self.ratios_.get(panel.names[s], self.pooled_ratios_)
            p_at, z_at = p[cells][:, None], z[cells][:, None]
            demand = np.zeros((len(cells), len(q)))
            if table is not None:
                positive = np.isfinite(p_at) & (p_at > 0) & np.isfinite(z_at) & (q > 1.0 - p_at)
                level = np.where(positive, (q - (1.0 - p_at)) / np.where(positive, p_at, 1.0), 0)
                ratio = np.interp(level, RATIO_LEVELS, table)
                demand = np.where(positive, np.nan_to_num(z_at) * ratio, 0.0)
            rows.append(np.repeat(demand, len(self.horizons), axis=0))
        return np.concatenate(rows) if rows else np.zeros((0, len(q)))
