"""What every forecast model shares: the fit/predict contract on long frames.

A model is a scikit-learn estimator. ``fit`` takes a long frame on a regular grid and learns
from every origin of it; ``predict`` takes a long frame and forecast origins and returns a long
frame of quantile forecasts, one row per (series, origin, target time). Forecasts issued at an
origin use cells at or before that origin only, so the frame handed to ``predict`` may extend
past the origins (walk-forward evaluation relies on it).

A model declared with ``target="window"`` also forecasts the quantiles of the largest value
over its whole window of horizons, cells ``origin + min(horizons) .. origin + max(horizons)``,
learned on that target (:meth:`BaseForecaster.predict_window`): what a capacity plan over the
lead window ``[t + L, t + L + hold]`` must cover. The largest of the per-horizon quantiles is not
that quantile (a burst that may come at any of several cells is likelier than at any one), and
:func:`lead_window_forecast` is the one rule that picks between the two.
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
# What a model learns: each horizon's value (the default) or, beside it, the window's maximum.
TARGETS = ("horizon", "window")


def lead_window_forecast(
    horizon_max: np.ndarray,
    window: np.ndarray | None,
    span: tuple[int, int] | None,
    first: np.ndarray | int,
    last: np.ndarray | int,
) -> np.ndarray:
    """The forecast a plan over horizons ``first..last`` sizes for: the model's window
    forecast where it has one for exactly that window, else the largest of the per-horizon
    quantiles (``horizon_max``).

    Every planner (the backtest's forecast policies, the live plan, the shadow replay) goes
    through this rule. ``first`` and ``last`` may be arrays (a window per row of
    ``horizon_max``); ``window`` has the shape of ``horizon_max`` and covers ``span``.

    >>> lead_window_forecast(np.array([5.0, 6.0]), np.array([7.0, 8.0]), (2, 4), 2, 4).tolist()
    [7.0, 8.0]
    >>> lead_window_forecast(np.array([5.0, 6.0]), np.array([7.0, 8.0]), (2, 4), 2, 3).tolist()
    [5.0, 6.0]
    """
    if window is None or span is None:
        return horizon_max
    matches = (np.asarray(first) == span[0]) & (np.asarray(last) == span[1])
    if matches.ndim and horizon_max.ndim > matches.ndim:
        matches = matches.reshape(matches.shape + (1,) * (horizon_max.ndim - matches.ndim))
    result: np.ndarray = np.where(matches, window, horizon_max)
    return result


def planned_window(
    forecast: pd.DataFrame,
    window: pd.DataFrame | None,
    window_span: tuple[int, int] | None,
    span: tuple[int, int],
    id_col: str,
    levels: Sequence[str],
) -> pd.DataFrame:
    """Per (series, origin), what a plan over horizons ``span`` sizes for, by
    :func:`lead_window_forecast`: from a model's per-horizon ``forecast`` (``predict``'s rows)
    and its window forecast (``predict_window``'s rows over ``window_span``, or None). Columns
    ``levels``, indexed by the id column and ``origin``, sorted."""
    inside = forecast[forecast["horizon"].between(*span)]
    largest = inside.groupby([id_col, "origin"], sort=True)[list(levels)].max()
    if window is None:
        return largest
    spanned = window.set_index([id_col, "origin"])[list(levels)].reindex(largest.index)
    values = lead_window_forecast(
        largest.to_numpy(dtype=float), spanned.to_numpy(dtype=float), window_span, *span
    )
    return pd.DataFrame(values, index=largest.index, columns=list(levels))


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
    target: str = "horizon"

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
        clean = self._training_frame(frame, Columns(id_col, time_col, target_col), covariates)
        panel = Panel.from_frame(clean, self.step_, columns=self.columns_, covariates=covariates)
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
        panel, cells = self._forecast_panel(frame, origins)
        values = self._predict_panel(panel, cells)
        values = np.sort(np.clip(values, 0.0, None), axis=1)
        return self._long_output(panel, cells, values)

    @property
    def window_span(self) -> tuple[int, int] | None:
        """First and last horizon (cells) of the window target; None without one."""
        if self.target != "window":
            return None
        return int(min(self.horizons)), int(max(self.horizons))

    def predict_window(self, frame: pd.DataFrame, origins: Origins = None) -> pd.DataFrame | None:
        """Quantile forecasts of the largest value over :attr:`window_span`, or None when
        the model has no window target.

        Takes what :meth:`predict` takes. Returns the id column, ``origin`` and one
        ``q<level>`` column per quantile, one row per (series, origin), monotone in the level
        and never negative.
        """
        check_is_fitted(self, "step_")
        if self.window_span is None:
            return None
        panel, cells = self._forecast_panel(frame, origins)
        values = np.sort(np.clip(self._predict_window_panel(panel, cells), 0.0, None), axis=1)
        out: dict[str, Any] = {
            self.columns_.id_col: np.concatenate(
                [np.full(len(c), panel.names[s], dtype=object) for s, c in enumerate(cells)]
            ),
            "origin": pd.to_datetime(
                np.concatenate([panel.times(s, c) for s, c in enumerate(cells)]), unit="s", utc=True
            ),
        }
        for j, q in enumerate(self.quantiles):
            out[quantile_column(q)] = values[:, j]
        return pd.DataFrame(out)

    # -- hooks -------------------------------------------------------------------------------
    def _fit_panel(self, panel: Panel) -> None:
        raise NotImplementedError

    def _predict_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def _predict_window_panel(self, panel: Panel, origins: Sequence[np.ndarray]) -> np.ndarray:
        """Window quantiles ``(origins, len(quantiles))``, ordered by series and origin."""
        raise NotImplementedError

    def check_params(self) -> None:
        """Raise :class:`ConfigError` naming the first bad parameter (what ``fit`` checks
        before reading any data), so a configuration can be refused when it is loaded."""
        self._check_params()

    # -- shared helpers ----------------------------------------------------------------------
    def _training_frame(
        self, frame: pd.DataFrame, columns: Columns, covariates: Sequence[str]
    ) -> pd.DataFrame:
        """``frame`` checked for fitting, after the parameters; records its columns, its
        covariates and its grid step."""
        self._check_params()
        clean = validate_frame(
            frame, columns=columns, covariates=covariates, min_rows=2, allow_missing=True
        )
        self.columns_ = columns
        self.covariates_ = tuple(covariates)
        self.step_ = infer_step(clean, columns=columns)
        return clean

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
        if self.target not in TARGETS:
            raise ConfigError(f"`target` must be one of {list(TARGETS)}, got {self.target!r}")

    def _forecast_panel(
        self, frame: pd.DataFrame, origins: Origins
    ) -> tuple[Panel, list[np.ndarray]]:
        """``frame`` checked and on the fitted grid, and the cells of ``origins`` per series."""
        check_is_fitted(self, "step_")
        columns = self.columns_
        clean = validate_frame(
            frame, columns=columns, covariates=self.covariates_, min_rows=1, allow_missing=True
        )
        panel = Panel.from_frame(clean, self.step_, columns=columns, covariates=self.covariates_)
        return panel, self._origin_cells(panel, origins)

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
