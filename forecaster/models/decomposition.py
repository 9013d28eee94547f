"""Seasonal decomposition (MSTL style): a level plus fixed daily and weekly components.

``fit`` splits each series into one additive component per season and a remainder, by
alternating over the seasons a few times as MSTL does: a season's component is the mean, at
each position of its period, of the series less the other components and less their centred
moving mean over one period (which a full period of the season averages out). Each component
is a profile indexed by the time of day (or of week), so it can be read at any future time.
``predict`` removes the learned profiles from the history, smooths what is left into a level
at the origin (an EWMA, so only recent cells are needed) and adds the profile at the target
time. Quantiles come from the empirical errors at each horizon, as for the baselines.

How fast the level follows the data is a property of the series, as in exponential smoothing,
where the smoothing constant is fitted: with ``halflife="auto"`` (the default) each series gets
the half-life of :data:`HALFLIFE_CELLS` whose forecasts at the model's horizons had the lowest
mean absolute error over its training history. The level is an EWMA of the past only, so those
errors are forecasts' errors; only the profiles are in sample, the same for every half-life.
A fixed half-life suits no two series: a half-hour taxi series wants the last cell, a noisy
5-minute CPU series hours (``benchmarks/results/forecast_accuracy.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError
from forecaster.models.baseline import PointBaseline, ewma, ewma_cells
from forecaster.panel import Panel

# A season is learned only from this many full periods of history: one period would be the
# history itself, replayed.
MIN_PERIODS = 2
AUTO = "auto"
# The half-lives ``auto`` chooses from, in cells of the series' grid: from the last value
# (half a cell) to a smoothing over hours of 5-minute cells.
HALFLIFE_CELLS = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# The level's half-life of a series ``auto`` did not see in fit.
UNSEEN_HALFLIFE = "1h"


def _slots(seconds: np.ndarray, step: int, period: int) -> np.ndarray:
    """Position of each time within its period, in cells (the same at any later period)."""
    return np.asarray((seconds // step) % period, dtype=np.int64)


def season_profile(residual: np.ndarray, slots: np.ndarray, period: int) -> np.ndarray:
    """Mean of ``residual`` at each slot of the period, centred to mean zero (0 if unseen)."""
    finite = np.isfinite(residual)
    sums = np.bincount(slots[finite], weights=residual[finite], minlength=period)
    counts = np.bincount(slots[finite], minlength=period)
    profile = np.divide(sums, counts, out=np.zeros(period), where=counts > 0)
    seen = counts > 0
    if seen.any():
        profile[seen] -= profile[seen].mean()
    return profile


class SeasonalDecomposition(PointBaseline):
    """Additive multi-seasonal decomposition with an EWMA level.

    Parameters
    ----------
    horizons, quantiles
        As for every model.
    seasons
        Season lengths, shortest first (``1d`` and ``7d``: daily and weekly components). A season
        needs two full periods of a series' history; shorter histories leave it out.
    halflife
        Half-life of the EWMA of the deseasonalized history that gives the level at an origin:
        a duration, or ``auto`` to fit one per series (``halflives_``: seconds by series; a
        series unseen in fit gets :data:`UNSEEN_HALFLIFE`).
    iterations
        Passes over the seasons (MSTL refines each component given the others).
    scale_window
        Trailing window whose mean scales the error quantiles.

    Examples
    --------
    >>> from forecaster.scenarios import steady_diurnal
    >>> frame = steady_diurnal(days=6, step=600, seed=1)
    >>> model = SeasonalDecomposition(horizons=(1, 3), quantiles=(0.5, 0.9)).fit(frame)
    >>> list(model.predict(frame).columns)
    ['series', 'origin', 'target_time', 'horizon', 'q0.5', 'q0.9']
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.1, 0.5, 0.9),
        seasons: Sequence[str] = ("1d", "7d"),
        halflife: str = AUTO,
        iterations: int = 2,
        scale_window: str = "1d",
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.seasons = seasons
        self.halflife = halflife
        self.iterations = iterations
        self.scale_window = scale_window

    def _check_params(self) -> None:
        super()._check_params()
        if isinstance(self.iterations, bool) or not (
            isinstance(self.iterations, int) and self.iterations >= 1
        ):
            raise ConfigError(f"`iterations` must be a whole number >= 1, got {self.iterations!r}")
        if isinstance(self.seasons, str) or not list(self.seasons):
            raise ConfigError(f"`seasons` must be a list of durations, got {self.seasons!r}")
        for season in self.seasons:
            parse_duration(season, name="seasons")
        if self.halflife != AUTO:
            parse_duration(self.halflife, name="halflife")

    def _periods(self, step: int) -> list[int]:
        return [max(2, round(parse_duration(s, name="seasons") / step)) for s in self.seasons]

    def _fit_panel(self, panel: Panel) -> None:
        periods = self._periods(panel.step)
        self.profiles_: dict[str, list[np.ndarray]] = {}
        for s, values in enumerate(panel.values):
            seconds = panel.times(s, np.arange(len(values)))
            usable = [p for p in periods if len(values) >= MIN_PERIODS * p]
            slots = [_slots(seconds, panel.step, p) for p in usable]
            parts = [np.zeros(len(values)) for _ in usable]
            profiles = [np.zeros(p) for p in usable]
            for _ in range(self.iterations):
                for i, period in enumerate(usable):
                    rest = values - (sum(parts) - parts[i])
                    trend = pd.Series(rest).rolling(period, center=True, min_periods=period // 2)
                    profiles[i] = season_profile(rest - trend.mean().to_numpy(), slots[i], period)
                    parts[i] = profiles[i][slots[i]]
            self.profiles_[panel.names[s]] = [
                profiles[usable.index(p)] if p in usable else np.zeros(p) for p in periods
            ]
        self.halflives_: dict[str, float] = {}
        if self.halflife == AUTO:
            self.halflives_ = {
                panel.names[s]: self._fitted_halflife(panel, s) for s in range(len(panel.names))
            }
        super()._fit_panel(panel)

    def _fitted_halflife(self, panel: Panel, s: int) -> float:
        """The half-life of :data:`HALFLIFE_CELLS` with the lowest mean absolute error of the
        forecasts of series ``s`` at the model's horizons, over its history."""
        values = panel.values[s]
        history = self.seasonal(panel, s, np.arange(len(values)))
        horizons = np.asarray(self.horizons, dtype=np.int64)
        origins = np.arange(max(0, len(values) - int(horizons.max())))
        targets = (origins[:, None] + horizons[None, :]).ravel()
        at = np.repeat(origins, len(horizons))
        errors = []
        for cells in HALFLIFE_CELLS:
            level = ewma_cells(values - history, cells)
            error = np.abs(values[targets] - level[at] - history[targets])
            finite = error[np.isfinite(error)]
            errors.append(finite.mean() if finite.size else np.inf)
        return HALFLIFE_CELLS[int(np.argmin(errors))] * panel.step

    def _level(self, panel: Panel, s: int, deseasonalized: np.ndarray) -> np.ndarray:
        """The level of series ``s`` after each cell: the EWMA of its ``deseasonalized``
        history at its fitted (or the fixed) half-life."""
        if self.halflife != AUTO:
            return ewma(deseasonalized, self.halflife, panel.step)
        seconds = self.halflives_.get(panel.names[s], parse_duration(UNSEEN_HALFLIFE))
        return ewma_cells(deseasonalized, seconds / panel.step)

    def seasonal(self, panel: Panel, s: int, cells: np.ndarray) -> np.ndarray:
        """The learned seasonal components of series ``s`` at grid cells ``cells`` (0 for a
        series unseen in fit)."""
        periods = self._periods(panel.step)
        profiles = self.profiles_.get(panel.names[s], [np.zeros(p) for p in periods])
        seconds = panel.times(s, cells)
        out = np.zeros(len(cells))
        for period, profile in zip(periods, profiles, strict=True):
            out += profile[_slots(seconds, panel.step, period)]
        return out

    def point(self, panel: Panel, s: int, origins: np.ndarray, horizons: np.ndarray) -> np.ndarray:
        values = panel.values[s]
        history = self.seasonal(panel, s, np.arange(len(values)))
        level = self._level(panel, s, values - history)
        return level[origins] + self.seasonal(panel, s, origins + horizons)
