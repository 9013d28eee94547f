"""The forecasters a user would pick instead of prewarm, wrapped to prewarm's fit/predict protocol.

Each peer has ``fit(frame)`` and ``predict(frame, origins)`` returning prewarm's long forecast
format (``series, origin, target_time, horizon, q0.5, q0.9``), so
:func:`forecaster.evaluation.evaluate` runs it on exactly the folds it gives prewarm's models.

What is refit when (``evaluate`` calls ``fit`` at the start of every block, i.e. once a day):

* ``statsforecast-autoets``: per block, ``AutoETS`` (season one day) is fitted on the last
  ``window_seasons`` days before the block; per origin, the library's ``forward`` re-runs the
  fitted model (parameters and initial states frozen) over the window up to that origin. The
  ETS form (``ZZZ`` search over error, trend, season and damping) is selected at the first block
  and its parameters re-estimated at every later block: the search costs 20-300 s at a 288-cell
  season, one form a few seconds, so neither a longer window nor a search per block fits in
  a benchmark.
* ``statsforecast-mstl``: per block, ``MSTL`` (daily and, with two weeks of data, weekly seasons;
  trend by ``AutoETS(model="ZZN")``, the library's default) is fitted on the last
  ``window_days`` days. The library's ``MSTL.forward`` re-runs the decomposition on every call,
  which costs tens of seconds per origin at these seasons, so per origin only the trend model
  moves forward: the seasonal components of the block's decomposition are extended the way
  ``MSTL.predict`` extends them (each repeats its last cycle), subtracted from the data up to the
  origin, and the trend model's ``forward`` runs on the remainder.
* ``mlforecast-lightgbm``: per block, features are built with ``MLForecast.preprocess`` and the
  LightGBM models refit with ``fit_models``. Each horizon ``h`` gets its own direct model whose
  lags are all at least ``h``, so the features of a target ``h`` cells after an origin read
  nothing after that origin. Quantiles come from LightGBM's ``quantile`` objective (one model per
  level), not from conformal intervals.

For the statistical peers ``q0.5`` is the mean forecast and other levels are the bounds of the
model's own prediction intervals (``q0.9`` = upper bound of the 80% interval). Like prewarm's
models, every peer clips forecasts at zero (demand is never negative) and sorts the quantiles.
Gaps (NaN cells) are forward-filled before the libraries see the data, since none accepts
missing values; forward filling reads only the past. Rows whose actual value is missing are
never training targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

import numpy as np
import pandas as pd

from forecaster.exceptions import ConfigError, UnknownNameError
from forecaster.frame import DEFAULT_COLUMNS, Columns, infer_step
from forecaster.models.base import quantile_column

DAY = 86400
WEEK = 7 * DAY


class Peer(Protocol):
    """What the benchmark needs of a peer (the evaluation's forecaster protocol)."""

    horizons: Sequence[int]
    quantiles: Sequence[float]

    def fit(self, frame: pd.DataFrame) -> Any: ...

    def predict(self, frame: pd.DataFrame, origins: pd.DatetimeIndex) -> pd.DataFrame: ...


@dataclass(frozen=True)
class _Series:
    """One series on its complete grid, gaps forward-filled; ``observed`` marks real values."""

    name: str
    times: pd.DatetimeIndex
    values: np.ndarray
    observed: np.ndarray


def grid_series(frame: pd.DataFrame, step: int, columns: Columns) -> list[_Series]:
    out = []
    for name, part in frame.groupby(columns.id_col, sort=True):
        values = part.set_index(columns.time_col)[columns.target_col].sort_index()
        grid = pd.date_range(values.index[0], values.index[-1], freq=f"{step}s")
        raw = values.reindex(grid).to_numpy(dtype=float)
        observed = np.isfinite(raw)
        out.append(_Series(str(name), grid, pd.Series(raw).ffill().to_numpy(), observed))
    return out


def grid_positions(times: pd.DatetimeIndex, origins: pd.DatetimeIndex, step: int) -> np.ndarray:
    """Grid positions of the ``origins`` that fall on the series' span."""
    offset = (origins - times[0]) / pd.Timedelta(seconds=step)
    cells = np.asarray(offset, dtype=float)
    inside = (cells >= 0) & (cells <= len(times) - 1) & (cells == np.round(cells))
    return np.unique(cells[inside].astype(np.int64))


def as_origins(origins: Sequence[pd.Timestamp] | pd.DatetimeIndex) -> pd.DatetimeIndex:
    index = pd.DatetimeIndex(list(origins))
    return index.tz_localize("UTC") if index.tz is None else index


def _interval_keys(quantiles: Sequence[float]) -> tuple[list[int], list[str]]:
    """statsforecast levels to ask for, and the output key of each quantile."""
    levels, keys = set(), []
    for q in quantiles:
        if not 0.0 < q < 1.0:
            raise ConfigError(f"`quantiles` must lie in (0, 1), got {quantiles!r}")
        if math.isclose(q, 0.5):
            keys.append("mean")
            continue
        level = round(abs(2 * q - 1) * 100)
        levels.add(level)
        keys.append(f"hi-{level}" if q > 0.5 else f"lo-{level}")
    return sorted(levels), keys


def long_forecasts(
    columns: Columns,
    quantiles: Sequence[float],
    names: list[str],
    origins: list[pd.Timestamp],
    horizons: list[int],
    step: int,
    values: list[np.ndarray],
) -> pd.DataFrame:
    """Prewarm's long forecast format, clipped at zero and monotone in the level."""
    origin = pd.DatetimeIndex(origins)
    if len(origin) and origin.tz is None:
        origin = origin.tz_localize("UTC")
    horizon = np.asarray(horizons, dtype=np.int64)
    matrix = np.asarray(values, dtype=float).reshape(len(names), len(quantiles))
    matrix = np.sort(np.clip(matrix, 0.0, None), axis=1)
    out: dict[str, Any] = {
        columns.id_col: names,
        "origin": origin,
        "target_time": origin + pd.to_timedelta(horizon * step, unit="s"),
        "horizon": horizon,
    }
    for j, q in enumerate(quantiles):
        out[quantile_column(q)] = matrix[:, j]
    return pd.DataFrame(out)


class _StatsForecastPeer:
    """A local statistical model per series: fit on a trailing window, move forward per origin."""

    horizons: Sequence[int]
    quantiles: Sequence[float]
    columns: Columns

    def _window_cells(self, step: int) -> int:
        raise NotImplementedError

    def _fit_series(self, name: str, y: np.ndarray, step: int) -> Any:
        raise NotImplementedError

    def _forward(self, state: Any, y: np.ndarray, h: int, levels: list[int]) -> dict[str, Any]:
        raise NotImplementedError

    def fit(self, frame: pd.DataFrame) -> Self:
        """Fit one model per series on the last window of ``frame`` (a long frame on a grid)."""
        self.step_ = infer_step(frame, columns=self.columns)
        self.states_: dict[str, tuple[pd.Timestamp, Any]] = {}
        for series in grid_series(frame, self.step_, self.columns):
            start = max(0, len(series.values) - self._window_cells(self.step_))
            # Leading cells before the first observation cannot be forward-filled.
            start = max(start, int(np.argmax(np.isfinite(series.values))))
            y = series.values[start:]
            fitted = self._fit_series(series.name, y, self.step_)
            self.states_[series.name] = (series.times[start], fitted)
        return self

    def predict(
        self, frame: pd.DataFrame, origins: Sequence[pd.Timestamp] | pd.DatetimeIndex
    ) -> pd.DataFrame:
        """Forecasts at each origin from the cells of ``frame`` up to that origin only."""
        if not hasattr(self, "states_"):
            raise ConfigError(f"{type(self).__name__} is not fitted: call fit first")
        levels, keys = _interval_keys(self.quantiles)
        wanted = as_origins(origins)
        far = max(self.horizons)
        names: list[str] = []
        at: list[pd.Timestamp] = []
        horizons: list[int] = []
        values: list[np.ndarray] = []
        for series in grid_series(frame, self.step_, self.columns):
            if series.name not in self.states_:
                continue
            start, state = self.states_[series.name]
            first = int((start - series.times[0]) / pd.Timedelta(seconds=self.step_))
            for cell in grid_positions(series.times, wanted, self.step_):
                if cell <= first:
                    continue
                forecast = self._forward(state, series.values[first : cell + 1], far, levels)
                for h in self.horizons:
                    names.append(series.name)
                    at.append(series.times[cell])
                    horizons.append(h)
                    values.append(np.array([forecast[k][h - 1] for k in keys]))
        return long_forecasts(self.columns, self.quantiles, names, at, horizons, self.step_, values)


class StatsForecastAutoETS(_StatsForecastPeer):
    """statsforecast ``AutoETS`` with a daily season, fitted per block, moved forward per origin.

    Parameters
    ----------
    horizons, quantiles
        As for prewarm's models.
    window_seasons
        Days of history each fit sees (the fit cost grows with window x season).
    select_once
        Search the ETS form (``ZZZ``: error, trend, season, damping) at the first fit of each
        series only and re-estimate that form's parameters at later fits. The search tries
        every form and costs 20-300 s at a 288-cell season; one form costs a few seconds.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.5, 0.9),
        window_seasons: int = 3,
        select_once: bool = True,
        columns: Columns = DEFAULT_COLUMNS,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.window_seasons = window_seasons
        self.select_once = select_once
        self.columns = columns

    def _window_cells(self, step: int) -> int:
        return self.window_seasons * max(1, DAY // step)

    def _fit_series(self, name: str, y: np.ndarray, step: int) -> Any:
        from statsforecast.models import AutoETS

        day = max(1, DAY // step)
        # ETS needs two full cycles to initialise a season; shorter series get none.
        season = day if len(y) >= 2 * day else 1
        # The selected form survives refits: evaluate reuses this object across blocks.
        if getattr(self, "forms_", None) is None:
            self.forms_: dict[tuple[str, int], tuple[str, bool]] = {}
        known = self.forms_.get((name, season)) if self.select_once else None
        if known is not None:
            form, damped = known
            try:
                return AutoETS(season_length=season, model=form, damped=damped).fit(y)
            # statsforecast raises bare exceptions when a form no longer fits (say, a
            # multiplicative one after zeros arrive); search again as on the first fit.
            except Exception:
                pass
        model = AutoETS(season_length=season).fit(y)
        components = model.model_["components"]
        self.forms_[(name, season)] = (components[:3], components[3] == "D")
        return model

    def _forward(self, state: Any, y: np.ndarray, h: int, levels: list[int]) -> dict[str, Any]:
        return dict(state.forward(y=y, h=h, level=levels or None))


@dataclass(frozen=True)
class _MSTLState:
    """A block's fitted MSTL: the decomposition's seasonal parts and the fitted trend model."""

    seasonal: np.ndarray  # (cells of the fit window, seasons)
    periods: tuple[int, ...]
    trend: Any

    def seasonal_sum(self, length: int) -> np.ndarray:
        """Sum of the seasonal components over ``length`` cells from the window start.

        Past the fit window each component repeats its last cycle, as ``MSTL.predict`` does.
        """
        fitted = len(self.seasonal)
        out = self.seasonal[: min(length, fitted)].sum(axis=1)
        if length <= fitted:
            return out
        extra = np.zeros(length - fitted)
        for j, period in enumerate(self.periods):
            cycle = self.seasonal[fitted - period :, j]
            extra += np.resize(cycle, length - fitted)
        return np.concatenate([out, extra])


class StatsForecastMSTL(_StatsForecastPeer):
    """statsforecast ``MSTL``, daily + weekly seasons: decomposed per block, trend moved per origin.

    Parameters
    ----------
    horizons, quantiles
        As for prewarm's models.
    window_days
        Days of history each decomposition sees.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.5, 0.9),
        window_days: int = 28,
        columns: Columns = DEFAULT_COLUMNS,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.window_days = window_days
        self.columns = columns

    def _window_cells(self, step: int) -> int:
        return self.window_days * DAY // step

    def _fit_series(self, name: str, y: np.ndarray, step: int) -> _MSTLState:
        from statsforecast.models import MSTL, AutoETS

        # STL separates a season only with at least two full cycles of it.
        periods = [p for p in (DAY // step, WEEK // step) if p > 1 and len(y) >= 2 * p]
        if not periods:
            raise ConfigError(f"MSTL needs two days of history, got {len(y)} cells of {step} s")
        # statsmodels' STL smooths every point exactly; R's stl() (which MSTL follows)
        # interpolates between every ~window/10-th point by default. Those jumps, taken from
        # the shortest season, make a month of 5-minute data decompose in about a second.
        shortest = periods[0]
        seasonal_window = 11  # MSTL's default for the first season
        trend_window = math.ceil(1.5 * shortest / (1 - 1.5 / seasonal_window))
        jumps = {
            "seasonal_jump": math.ceil(seasonal_window / 10),
            "trend_jump": math.ceil(trend_window / 10),
            "low_pass_jump": math.ceil((shortest + 1) / 10),
        }
        model = MSTL(season_length=periods, trend_forecaster=AutoETS(model="ZZN"), stl_kwargs=jumps)
        model.fit(y)
        seasonal = model.model_.filter(regex="^seasonal").to_numpy(dtype=float)
        return _MSTLState(seasonal, tuple(sorted(periods)), model.trend_forecaster)

    def _forward(
        self, state: _MSTLState, y: np.ndarray, h: int, levels: list[int]
    ) -> dict[str, Any]:
        seasonal = state.seasonal_sum(len(y) + h)
        result = state.trend.forward(y=y - seasonal[: len(y)], h=h, level=levels or None)
        return {key: np.asarray(v) + seasonal[len(y) :] for key, v in result.items()}


class MLForecastLightGBM:
    """mlforecast with LightGBM quantile models: one direct model per horizon, lags >= horizon.

    Parameters
    ----------
    horizons, quantiles
        As for prewarm's models.
    recent_lags
        How many consecutive lags, starting at the horizon, describe the recent past.
    n_estimators, learning_rate, num_leaves
        LightGBM's own parameters (its defaults, apart from the objective).
    random_state
        LightGBM's seed.
    """

    def __init__(
        self,
        horizons: Sequence[int] = (1,),
        quantiles: Sequence[float] = (0.5, 0.9),
        recent_lags: int = 12,
        n_estimators: int = 100,
        learning_rate: float = 0.1,
        num_leaves: int = 31,
        random_state: int = 0,
        columns: Columns = DEFAULT_COLUMNS,
    ) -> None:
        self.horizons = horizons
        self.quantiles = quantiles
        self.recent_lags = recent_lags
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.random_state = random_state
        self.columns = columns

    def _forecaster(self, h: int, step: int) -> Any:
        from lightgbm import LGBMRegressor
        from mlforecast import MLForecast
        from mlforecast.lag_transforms import RollingMean, RollingStd

        day, week = max(1, DAY // step), max(1, WEEK // step)
        recent = list(range(h, h + self.recent_lags))
        # The usual set: the last hour or so, the same time yesterday and last week, a short
        # and a daily rolling mean; every lag is >= h so the model is direct at horizon h.
        lags = sorted({*recent, *(lag for lag in (day, week) if lag >= h)})
        models = {
            quantile_column(q): LGBMRegressor(
                objective="quantile",
                alpha=q,
                n_estimators=self.n_estimators,
                learning_rate=self.learning_rate,
                num_leaves=self.num_leaves,
                random_state=self.random_state,
                n_jobs=1,
                verbose=-1,
            )
            for q in self.quantiles
        }
        return MLForecast(
            models=models,
            freq=f"{step}s",
            lags=lags,
            lag_transforms={
                h: [
                    *(RollingMean(window_size=w) for w in sorted({self.recent_lags, day})),
                    RollingStd(window_size=self.recent_lags),
                ]
            },
            date_features=["hour", "dayofweek"],
        )

    def _features(
        self, forecaster: Any, series: list[_Series], extend: int
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Feature rows of every cell (plus ``extend`` cells past each series' end)."""
        parts, observed = [], []
        for s in series:
            times = pd.date_range(s.times[0], periods=len(s.times) + extend, freq=s.times.freq)
            # Rows past the end only need a placeholder target: their own features read cells
            # at least h earlier, which are all observed or forward-filled.
            y = np.concatenate([s.values, np.full(extend, s.values[-1])])
            parts.append(pd.DataFrame({"unique_id": s.name, "ds": times, "y": y}))
            observed.append(np.concatenate([s.observed, np.zeros(extend, dtype=bool)]))
        frame = pd.concat(parts, ignore_index=True)
        features = forecaster.preprocess(frame, dropna=False, static_features=[])
        return features, np.concatenate(observed)

    def fit(self, frame: pd.DataFrame) -> Self:
        """Fit one direct model per horizon and quantile on every observed target of ``frame``."""
        self.step_ = infer_step(frame, columns=self.columns)
        series = grid_series(frame, self.step_, self.columns)
        self.forecasters_: dict[int, Any] = {}
        for h in self.horizons:
            forecaster = self._forecaster(h, self.step_)
            features, observed = self._features(forecaster, series, 0)
            rows = features[observed]
            forecaster.fit_models(rows.drop(columns=["unique_id", "ds", "y"]), rows["y"].to_numpy())
            self.forecasters_[h] = forecaster
        return self

    def predict(
        self, frame: pd.DataFrame, origins: Sequence[pd.Timestamp] | pd.DatetimeIndex
    ) -> pd.DataFrame:
        """Forecasts at each origin; each reads the cells of ``frame`` up to that origin only."""
        if not hasattr(self, "forecasters_"):
            raise ConfigError("MLForecastLightGBM is not fitted: call fit first")
        series = grid_series(frame, self.step_, self.columns)
        wanted = as_origins(origins)
        names: list[str] = []
        at: list[pd.Timestamp] = []
        horizons: list[int] = []
        values: list[np.ndarray] = []
        for h, forecaster in self.forecasters_.items():
            features, _ = self._features(forecaster, series, h)
            features = features.set_index(["unique_id", "ds"])
            for s in series:
                cells = grid_positions(s.times, wanted, self.step_)
                if not len(cells):
                    continue
                origin = s.times[cells]
                target = origin + pd.Timedelta(seconds=h * self.step_)
                keys = pd.MultiIndex.from_arrays([np.full(len(target), s.name), target])
                X = features.loc[keys].drop(columns=["y"])
                predicted = np.column_stack(
                    [forecaster.models_[quantile_column(q)].predict(X) for q in self.quantiles]
                )
                names.extend([s.name] * len(origin))
                at.extend(origin)
                horizons.extend([h] * len(origin))
                values.extend(predicted)
        return long_forecasts(self.columns, self.quantiles, names, at, horizons, self.step_, values)


PEERS: dict[str, Callable[..., Peer]] = {
    "statsforecast-autoets": StatsForecastAutoETS,
    "statsforecast-mstl": StatsForecastMSTL,
    "mlforecast-lightgbm": MLForecastLightGBM,
}


def make_peer(name: str, **params: Any) -> Peer:
    """A new, unfitted peer of registered ``name``; unknown names list the valid ones."""
    try:
        factory = PEERS[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown peer {name!r}; registered peers: {', '.join(sorted(PEERS))}"
        ) from None
    return factory(**params)
