"""A forecast that knows the demand around its target: the accuracy benchmark's yardstick.

The backtests measure every policy against a perfect-foresight oracle; the accuracy benchmark
has none, so a lead over the peers says nothing of how much lead there was to take. The
yardstick :class:`Hindsight` forecasts the demand at a target time as the mean of the two cells
either side of it, read from the data *after* the origin (the cell before the target and the
cell after it), and adds to that mean, per quantile level, the conformal offset of its errors on
the last ``calibration_days`` of the data it was fitted on (the offset alone is learned out of
sample, as prewarm's calibration is). It cannot be deployed: it reads the future.

What it measures: where its loss is not 10% under the best peer's, a forecast 10 minutes ahead
that led the peer by 10% would know the demand's level better than the average of the demand
just before and just after the target. It is not a bound: on a trace whose peaks are seasonal
and narrow (a spike every hour), a seasonal model forecasts the peak a neighbours' mean blurs,
and the yardstick trails the peer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import pandas as pd

from benchmarks.peers import DAY, as_origins, grid_positions, grid_series, long_forecasts
from forecaster.calibration import conformal_offsets
from forecaster.exceptions import ConfigError
from forecaster.frame import DEFAULT_COLUMNS, Columns, infer_step


def neighbours_mean(values: np.ndarray) -> np.ndarray:
    """Each cell's estimate from the cells either side of it: their mean; the one observed
    when the other is missing or past an end; NaN where neither is observed."""
    before = np.concatenate([[np.nan], values[:-1]])
    after = np.concatenate([values[1:], [np.nan]])
    both = np.vstack([before, after])
    observed = np.isfinite(both).sum(axis=0)
    total = np.nansum(both, axis=0)
    return np.divide(total, observed, out=np.full(len(values), np.nan), where=observed > 0)


class Hindsight:
    """The neighbours' mean of each target cell plus per-level offsets (see the module).

    Parameters
    ----------
    horizons
        Cells ahead of each origin to forecast.
    quantiles
        Levels of the forecast columns.
    calibration_days
        Trailing span of the fitted data whose errors size the offsets (prewarm's default
        calibration window, 3 days).
    """

    def __init__(
        self,
        horizons: Sequence[int] = (2,),
        quantiles: Sequence[float] = (0.5, 0.9),
        calibration_days: float = 3.0,
        columns: Columns = DEFAULT_COLUMNS,
    ) -> None:
        self.horizons = tuple(horizons)
        self.quantiles = tuple(quantiles)
        self.calibration_days = calibration_days
        self.columns = columns

    def fit(self, frame: pd.DataFrame) -> Self:
        """Learn each level's offset from the errors of the last ``calibration_days``."""
        self.step_ = infer_step(frame, columns=self.columns)
        cells = max(1, round(self.calibration_days * DAY / self.step_))
        errors = []
        for series in grid_series(frame, self.step_, self.columns):
            # The raw values: a forward-filled gap is not an observation to score.
            raw = np.where(series.observed, series.values, np.nan)[-cells:]
            errors.append(raw - neighbours_mean(raw))
        scores = np.concatenate(errors)
        scores = scores[np.isfinite(scores)]
        if not scores.size:
            raise ConfigError("hindsight: no cell of the calibration span has a neighbour")
        # One score column serves every level: the offsets are prewarm's conformal ones.
        columns = np.broadcast_to(scores[:, None], (scores.size, len(self.quantiles)))
        self.offsets_ = conformal_offsets(columns, self.quantiles)
        return self

    def predict(
        self, frame: pd.DataFrame, origins: Sequence[pd.Timestamp] | pd.DatetimeIndex
    ) -> pd.DataFrame:
        """Each origin's forecasts from the cells either side of each target, in ``frame``."""
        if not hasattr(self, "offsets_"):
            raise ConfigError("Hindsight is not fitted: call fit first")
        wanted = as_origins(origins)
        rows: dict[str, list[Any]] = {"names": [], "at": [], "horizons": [], "values": []}
        for series in grid_series(frame, self.step_, self.columns):
            level = neighbours_mean(np.where(series.observed, series.values, np.nan))
            for cell in grid_positions(series.times, wanted, self.step_):
                for h in self.horizons:
                    target = cell + h
                    mean = level[target] if target < len(level) else np.nan
                    rows["names"].append(series.name)
                    rows["at"].append(series.times[cell])
                    rows["horizons"].append(h)
                    rows["values"].append(mean + self.offsets_)
        return long_forecasts(
            self.columns,
            self.quantiles,
            rows["names"],
            rows["at"],
            rows["horizons"],
            self.step_,
            rows["values"],
        )
