"""Seasonal decomposition (MSTL style): a level plus fixed daily and weekly components.

``fit`` splits each series into one additive component per season and a remainder, by
alternating over the seasons a few times as MSTL does: a season's component is the mean, at
each position of its period, of the series less the other components and less their centred
moving mean over one period (which a full period of the season averages out). Each component
is a profile indexed by the time of day (or of week), so it can be read at any future time.
``predict`` removes the learned profiles from the history, smooths what is left into a level
at the origin (an EWMA, so only recent cells are needed) and adds the profile at the target
time. Quantiles come from the empirical errors at each horizon, as for the baselines.
The level's half-life is fitted per series by default, as for ``ewma``
(:class:`forecaster.models.baseline.SmoothedLevel`); only the profiles are then in sample, the
same for every half-life.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, check_whole
from forecaster.models.baseline import AUTO, SmoothedLevel
from forecaster.panel import Panel

# A season is learned only from this many full periods of history: one period would be the
# history itself, replayed.
MIN_PERIODS = 2


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


class SeasonalDecomposition(SmoothedLevel):
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
        a duration, or ``auto``: fitted per series (:class:`SmoothedLevel`).
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
        check_whole("iterations", self.iterations, 1)
        if isinstance(self.seasons, str) or not list(self.seasons):
            raise ConfigError(f"`seasons` must be a list of durations, got {self.seasons!r}")
        for season in self.seasons:
            parse_duration(season, name="seasons")

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
        super()._fit_panel(panel)

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
