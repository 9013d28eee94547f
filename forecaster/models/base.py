"""What every forecast model shares: the fit/predict contract on long frames.

A model is a scikit-learn estimator. ``fit`` takes a long frame on a regular grid and learns
from every origin of it; ``predict`` takes a long frame and forecast origins and returns a long
frame of quantile forecasts, one row per (series, origin, target time). Forecasts issued at an
origin use cells at or before that origin only, so the frame handed to ``predict`` may extend
past the origins (walk-forward evaluation relies on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.frame import Columns, infer_step, validate_frame
from forecaster.panel import NS, Panel

Origins = pd.DatetimeIndex | list[pd.Timestamp] | None


def quantile_column(q: float) -> str:
    """Name of the column holding quantile ``q`` (``0.9`` -> ``"q0.9"``)."""
    return f"q{q:g}"


class BaseForecaster(BaseEstimator):
    """Base class: parameter checks, frame handling and the long output format.

    Subclasses implement ``_fit_panel(panel)`` and ``_predict_panel(panel, origins)``; the latter
    returns an array of shape ``(rows, len(quantiles))`` ordered by series, origin, horizon.
    """

    horizons: Sequence[int]
    quantiles: Sequence[float]

    def fit(
        self,
        frame: pd.DataFrame,
        *,
        id_col: str = "series",
        time_col: str = "timestamp",
        target_col: str = "value",
        covariates: Sequence[str] = (),
    ) -> Self:
        """Learn from every origin of ``frame`` (a long frame on a regular grid; NaN = gap)."""
        self._check_params()
        columns = Columns(id_col, time_col, target_col)
        clean = validate_frame(
            frame, columns=columns, covariates=covariates, min_rows=2, allow_missing=True
        )
        self.columns_ = columns
        self.covariates_ = tuple(covariates)
        self.step_ = infer_step(clean, columns=columns)
        panel = Panel.from_frame(clean, self.step_, columns=columns, covariates=covariates)
        self.series_codes_ = {name: code for code, name in enumerate(panel.names)}
        self._fit_panel(panel)
        return self

    def predict(self, frame: pd.DataFrame, origins: Origins = None) -> pd.DataFrame:
        """Quantile forecasts for every series of ``frame`` at each origin.

        Parameters
        ----------
        frame
            Long frame on the grid the model was fitted on, with the same columns.
        origins
            Forecast origins (UTC timestamps on the grid). For each series, the origins within its
            span are used. ``None`` means the last timestamp of each series.

        Returns
        -------
        pandas.DataFrame
            Columns: the id column, ``origin``, ``target_time``, ``horizon`` (cells) and one
            ``q<level>`` column per quantile, monotone in the level and never negative.
        """
        check_is_fitted(self, "step_")
        columns = self.columns_
        clean = validate_frame(
            frame, columns=columns, covariates=self.covariates_, min_rows=1, allow_missing=True
        )
        panel = Panel.from_frame(clean, self.step_, columns=columns, covariates=self.covariates_)
        cells = self._origin_cells(panel, origins)
        values = self._predict_panel(panel, cells)
        values = np.sort(np.clip(values, 0.0, None), axis=1)
        return self._long_output(panel, cells, values)

    # -- hooks -------------------------------------------------------------------------------
    def _fit_panel(self, panel: Panel) -> None:
        raise NotImplementedError

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def check_params(self) -> None:
        """Raise :class:`ConfigError` naming the first bad parameter (what ``fit`` checks
        before reading any data), so a configuration can be refused when it is loaded."""
        self._check_params()

    # -- shared helpers ----------------------------------------------------------------------
    def _check_params(self) -> None:
        horizons = list(self.horizons)
        if not horizons or any(
            not isinstance(h, int | np.integer) or isinstance(h, bool) or h < 1 for h in horizons
        ):
            raise ConfigError(f"`horizons` must be whole cells >= 1, got {self.horizons!r}")
        if sorted(set(horizons)) != horizons:
            raise ConfigError(f"`horizons` must be sorted and unique, got {self.horizons!r}")
        quantiles = list(self.quantiles)
        if not quantiles or any(not 0.0 < float(q) < 1.0 for q in quantiles):
            raise ConfigError(f"`quantiles` must lie in (0, 1), got {self.quantiles!r}")
        if sorted(set(quantiles)) != quantiles:
            raise ConfigError(f"`quantiles` must be sorted and unique, got {self.quantiles!r}")

    def _codes(self, panel: Panel) -> list[int]:
        # Series unseen in fit get -1, which both boosting libraries read as "missing".
        return [self.series_codes_.get(name, -1) for name in panel.names]

    @staticmethod
    def _training_origins(panel: Panel, horizons: Sequence[int]) -> list[np.ndarray]:
        """Every cell that has a target within the data for the shortest horizon."""
        first = min(horizons)
        return [np.arange(0, max(len(v) - first, 0), dtype=np.int64) for v in panel.values]

    def _origin_cells(self, panel: Panel, origins: Origins) -> list[np.ndarray]:
        if origins is None:
            return [np.array([len(v) - 1], dtype=np.int64) for v in panel.values]
        seconds = pd.DatetimeIndex(origins)
        if seconds.tz is None:
            seconds = seconds.tz_localize("UTC")
        wanted = np.unique(seconds.asi8 // NS)
        cells = []
        for s, values in enumerate(panel.values):
            end = panel.starts[s] + (len(values) - 1) * panel.step
            inside = wanted[(wanted >= panel.starts[s]) & (wanted <= end)]
            cells.append(panel.index_of(s, inside))
        if sum(len(c) for c in cells) == 0:
            raise DataValidationError(
                f"no origin falls inside any series: origins {seconds.min()} .. {seconds.max()}"
            )
        return cells

    def _long_output(
        self, panel: Panel, origins: Sequence[np.ndarray], values: np.ndarray
    ) -> pd.DataFrame:
        horizons = np.asarray(self.horizons, dtype=np.int64)
        names, origin_s, horizon = [], [], []
        for s, cells in enumerate(origins):
            names.append(np.full(len(cells) * len(horizons), panel.names[s], dtype=object))
            origin_s.append(np.repeat(panel.times(s, cells), len(horizons)))
            horizon.append(np.tile(horizons, len(cells)))
        origin_arr = np.concatenate(origin_s)
        horizon_arr = np.concatenate(horizon)
        out: dict[str, Any] = {
            self.columns_.id_col: np.concatenate(names),
            "origin": pd.to_datetime(origin_arr, unit="s", utc=True),
            "target_time": pd.to_datetime(
                origin_arr + horizon_arr * panel.step, unit="s", utc=True
            ),
            "horizon": horizon_arr,
        }
        for j, q in enumerate(self.quantiles):
            out[quantile_column(q)] = values[:, j]
        return pd.DataFrame(out)
