"""Declarative, leakage-free features for direct multi-horizon forecasting.

A feature row describes one (series, origin, horizon) triple. Everything derived from the
target or a covariate uses cells at or before the origin only; only the calendar and the user's
event calendar look at the target time, because both are known in advance. Value features are
divided by the series' trailing mean at the origin (its *scale*), so a series of 100 requests per
hour and one of 10,000 share one model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError, shown
from forecaster.frame import MAX_GRID_CELLS
from forecaster.panel import Panel
from forecaster.windows import WindowStats

CALENDAR = ("minute_of_day", "minute_of_hour", "hour", "day_of_week", "is_weekend")
WINDOW_STATS = ("mean", "max", "std")
BURST_PARTS = ("share", "excess", "since")


@dataclass(frozen=True)
class Event:
    """A known calendar entry (launch, campaign, holiday): a flag over ``[start, end)`` UTC."""

    name: str
    start: str
    end: str

    def bounds(self) -> tuple[int, int]:
        """Start and end in Unix seconds."""
        start, end = pd.Timestamp(self.start), pd.Timestamp(self.end)
        start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
        end = end.tz_localize("UTC") if end.tzinfo is None else end.tz_convert("UTC")
        if end <= start:
            raise ConfigError(f"event {self.name!r} must end after it starts, got {self}")
        return int(start.value // 1_000_000_000), int(end.value // 1_000_000_000)


@dataclass(frozen=True)
class FeatureConfig:
    """Which features to build. Every field is plain data, so it logs to MLflow unchanged.

    Parameters
    ----------
    lags
        Cells before the origin whose values become features (0 is the origin's own value).
    windows
        Durations of trailing windows ending at the origin, summarised by ``window_stats``.
    window_stats
        Any of ``mean``, ``max``, ``std``.
    seasonal_lags
        Seasons (``1d``, ``7d``): the value one season before the *target* time, smoothed over
        ``seasonal_smoothing`` cells each side, and the same rescaled by how the recent level
        compares with the level one season before the origin.
    seasonal_smoothing
        Cells averaged on each side of a seasonal lag.
    calendar
        Calendar features of the target time: ``minute_of_day``, ``minute_of_hour``,
        ``hour``, ``day_of_week``, ``is_weekend``. ``minute_of_hour`` places what recurs every
        hour (a cron job at minute 9), which ``minute_of_day`` only finds by 24 separate splits.
    covariate_lags
        Lags (cells before the origin) of every covariate column.
    events
        User calendar; one flag per event name, set when the target time falls in the event.
    scale_window
        Trailing window of the mean that normalizes the series (see :func:`trailing_scale`).
    burst_window
        Trailing window of the recent-burst features (None: none). A cell is a burst when it
        exceeds the mean of the ``burst_reference`` before it by more than ``burst_sigma`` of
        their standard deviations; at the origin the features are the share of burst cells in
        the window, their mean excess per cell (divided by the scale) and the cells since the
        last burst (as a share of the window, 1 when none). See :func:`burst_features`.
    burst_sigma, burst_reference
        The burst threshold in standard deviations, and the window it is measured against.
    """

    lags: tuple[int, ...] = (0, 1, 2, 3, 6)
    windows: tuple[str, ...] = ("30m", "2h", "12h")
    window_stats: tuple[str, ...] = WINDOW_STATS
    seasonal_lags: tuple[str, ...] = ("1d", "7d")
    seasonal_smoothing: int = 1
    calendar: tuple[str, ...] = ("minute_of_day", "day_of_week", "is_weekend")
    covariate_lags: tuple[int, ...] = (0, 1)
    events: tuple[Event, ...] = field(default_factory=tuple)
    scale_window: str = "1d"
    burst_window: str | None = None
    burst_sigma: float = 3.0
    burst_reference: str = "2h"

    def __post_init__(self) -> None:
        lags = (*self.lags, *self.covariate_lags)
        if any(not isinstance(lag, int) or not 0 <= lag <= MAX_GRID_CELLS for lag in lags):
            # a lag past the longest series a grid may hold reaches no data at all
            raise ConfigError(
                f"`lags` and `covariate_lags` must be whole cells in [0, {MAX_GRID_CELLS:,}], "
                f"got {shown(self.lags)} and {shown(self.covariate_lags)}"
            )
        for name, allowed, given in (
            ("window_stats", WINDOW_STATS, self.window_stats),
            ("calendar", CALENDAR, self.calendar),
        ):
            unknown = sorted(set(given) - set(allowed))
            if unknown:
                raise ConfigError(f"`{name}` has unknown entries {unknown}; valid: {list(allowed)}")
        if self.seasonal_smoothing < 0:
            raise ConfigError(f"`seasonal_smoothing` must be >= 0, got {self.seasonal_smoothing!r}")
        bursts = [w for w in (self.burst_window, self.burst_reference) if w is not None]
        for text in (*self.windows, *self.seasonal_lags, self.scale_window, *bursts):
            parse_duration(text, name="feature window")
        if not (isinstance(self.burst_sigma, int | float) and self.burst_sigma > 0):
            raise ConfigError(f"`burst_sigma` must be a number > 0, got {self.burst_sigma!r}")
        for event in self.events:
            event.bounds()

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form, e.g. for MLflow params or YAML."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FeatureConfig:
        """Inverse of :meth:`to_dict` (lists become tuples)."""
        fields: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in data.items()
        }
        fields["events"] = tuple(Event(**event) for event in data.get("events", ()))
        return cls(**fields)


HOUR = "1h"


def with_hour_phase(config: FeatureConfig) -> FeatureConfig:
    """``config`` with the hour's phase among its features: the ``minute_of_hour`` of the
    target time and its seasonal lag of one hour (the demand an hour before the target).

    Both kept in a fixed order (the calendar's, the seasons' by length), so the same
    declaration always builds the same columns.

    >>> hourly = with_hour_phase(FeatureConfig())
    >>> hourly.calendar, hourly.seasonal_lags
    (('minute_of_day', 'minute_of_hour', 'day_of_week', 'is_weekend'), ('1h', '1d', '7d'))
    >>> with_hour_phase(hourly) == hourly
    True
    """

    def seconds(season: str) -> float:
        return parse_duration(season, name="seasonal_lags")

    calendar = {*config.calendar, "minute_of_hour"}
    seasons = list(config.seasonal_lags)
    if seconds(HOUR) not in map(seconds, seasons):  # "60m" is the hour already
        seasons.append(HOUR)
    return replace(
        config,
        calendar=tuple(name for name in CALENDAR if name in calendar),
        seasonal_lags=tuple(sorted(seasons, key=seconds)),
    )


def _cells(duration: str, step: int, *, minimum: int = 1) -> int:
    return max(minimum, round(parse_duration(duration) / step))


MIN_SCALE = 1e-9  # below this a trailing mean is a silent stretch, not a level
# The scale never drops below this share of the mean over this many scale windows: after a
# quiet day (a holiday, a storm, an outage) a one-day mean collapses and every scaled value
# and calibration score explodes with it, while a real change of level still shows at once.
FLOOR_SHARE, FLOOR_WINDOWS = 0.5, 7


def trailing_scale(
    values: np.ndarray | WindowStats,
    window: int,
    cells: np.ndarray,
    lower: np.ndarray | int = 0,
    upper: np.ndarray | int | None = None,
) -> np.ndarray:
    """A series' level at each of ``cells``: the trailing mean over ``window`` cells, floored at
    half the trailing mean over seven windows; where that is not positive (a silent stretch),
    the expanding mean; where that is not positive either, 1. ``lower`` and ``upper`` bound
    each cell's series in a concatenated array."""
    stats = values if isinstance(values, WindowStats) else WindowStats(values)
    recent = stats.mean(cells, window, lower, upper)
    longer = stats.mean(cells, window * FLOOR_WINDOWS, lower, upper)
    scale = np.fmax(recent, FLOOR_SHARE * longer)
    usable = np.isfinite(scale) & (scale > MIN_SCALE)
    scale = np.where(usable, scale, stats.expanding_mean(cells, lower, upper))
    return np.where(np.isfinite(scale) & (scale > MIN_SCALE), scale, 1.0)


def take(
    values: np.ndarray,
    cells: np.ndarray,
    lower: np.ndarray | int = 0,
    upper: np.ndarray | int | None = None,
) -> np.ndarray:
    """``values[cells]``, NaN where a cell falls outside ``[lower, upper)`` (its series)."""
    upper = len(values) if upper is None else upper
    cells = np.asarray(cells, dtype=np.int64)
    inside = (cells >= lower) & (cells < upper)
    out = np.full(cells.shape, np.nan)
    out[inside] = values[cells[inside]]
    return out


@dataclass(frozen=True)
class FeatureMatrix:
    """Features of (series, origin, horizon) rows plus what is needed to undo the scaling."""

    X: np.ndarray
    names: tuple[str, ...]
    series: np.ndarray
    origin: np.ndarray
    horizon: np.ndarray
    scale: np.ndarray


def feature_names(config: FeatureConfig, step: int, covariates: Sequence[str]) -> list[str]:
    """Column names of the matrix :func:`build_features` returns, in order."""
    names = ["series_code", "horizon", "log_scale"]
    names += [f"lag_{lag}" for lag in config.lags]
    for window in _windows(config, step):
        names += [f"{stat}_{window}" for stat in config.window_stats]
    for season in config.seasonal_lags:
        names += [f"seasonal_{season}", f"seasonal_{season}_rescaled"]
    names += [f"cal_{name}" for name in config.calendar]
    names += [f"{cov}_lag_{lag}" for cov in covariates for lag in config.covariate_lags]
    names += [f"event_{name}" for name in _event_names(config)]
    if config.burst_window is not None:
        names += [f"burst_{part}_{config.burst_window}" for part in BURST_PARTS]
    return names


def _windows(config: FeatureConfig, step: int) -> list[str]:
    # Windows shorter than two cells carry no more than lag_0: drop them, keep order.
    return [w for w in dict.fromkeys(config.windows) if parse_duration(w) >= 2 * step]


def _event_names(config: FeatureConfig) -> list[str]:
    return list(dict.fromkeys(event.name for event in config.events))


GROUP_CELLS = 4_000_000
"""Cells of history one pass of :func:`build_features` holds window statistics of (their
prefix arrays take about 48 bytes a cell): a fleet's features are built a group of series at
a time, so memory follows the group and the rows asked for, not the fleet's history."""


def build_features(
    panel: Panel,
    origins: Sequence[np.ndarray],
    horizons: Sequence[int],
    config: FeatureConfig,
    series_codes: Sequence[int] | None = None,
) -> FeatureMatrix:
    """Features for every series, origin and horizon: rows ordered by series, then origin,
    then horizon, built vectorized over groups of series of at most :data:`GROUP_CELLS`
    cells of history each.

    Parameters
    ----------
    panel
        The data; cells after an origin may be present and are never read for that origin.
    origins
        Per series, the grid cells of the forecast origins.
    horizons
        Horizons in cells.
    config
        Feature declaration.
    series_codes
        Integer code of each series for the categorical id feature (default: its position).
    """
    horizon_arr = np.asarray(horizons, dtype=np.int64)
    codes = np.arange(len(panel.names)) if series_codes is None else np.asarray(series_codes)
    groups = _series_groups(panel, GROUP_CELLS)
    if len(groups) <= 1:  # the group's matrix is the matrix: no copy
        return _group_features(panel, origins, horizon_arr, config, codes)
    names = feature_names(config, panel.step, list(panel.covariates))
    rows = np.array([len(cells) * len(horizon_arr) for cells in origins], dtype=np.int64)
    X = np.empty((int(rows.sum()), len(names)), dtype=np.float32)
    series, origin, horizon, scale = (np.empty(len(X), dtype=t) for t in ("i8", "i8", "i8", "f8"))
    first_row = 0
    for group in groups:
        part = _group_features(
            panel.subset(group), [origins[s] for s in group], horizon_arr, config, codes[group]
        )
        done = slice(first_row, first_row + len(part.X))
        X[done] = part.X
        series[done] = group[part.series]  # the group's series numbers, in the whole panel
        origin[done] = part.origin
        horizon[done] = part.horizon
        scale[done] = part.scale
        first_row = done.stop
    return FeatureMatrix(
        X=X, names=tuple(names), series=series, origin=origin, horizon=horizon, scale=scale
    )


def _series_groups(panel: Panel, cells: int) -> list[np.ndarray]:
    """Consecutive series, each group holding at most ``cells`` cells of history (a longer
    series is a group of its own)."""
    ends = np.cumsum([len(v) for v in panel.values], dtype=np.int64)
    groups: list[np.ndarray] = []
    start = 0
    while start < len(ends):
        held = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, held + cells, side="right")))
        groups.append(np.arange(start, stop))
        start = stop
    return groups


def _group_features(
    panel: Panel,
    origins: Sequence[np.ndarray],
    horizon_arr: np.ndarray,
    config: FeatureConfig,
    codes: np.ndarray,
) -> FeatureMatrix:
    """:func:`build_features` of one group of series, in one vectorized pass."""
    step = panel.step
    counts = np.array([len(cells) * len(horizon_arr) for cells in origins], dtype=np.int64)
    series = np.repeat(np.arange(len(panel.names)), counts)
    o = np.concatenate(
        [np.repeat(np.asarray(c, dtype=np.int64), len(horizon_arr)) for c in origins]
    )
    h = np.tile(horizon_arr, int(counts.sum() // max(len(horizon_arr), 1)))
    # All series side by side in one array: row r reads cells [lower[r], upper[r]) only.
    lengths = np.array([len(v) for v in panel.values], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    lower, upper = offsets[series], offsets[series] + lengths[series]
    stats = WindowStats(np.concatenate(panel.values) if panel.values else np.empty(0))
    origin, target = lower + o, lower + o + h

    scale = trailing_scale(stats, _cells(config.scale_window, step), origin, lower, upper)
    names = feature_names(config, step, list(panel.covariates))
    columns = _Columns(len(o), len(names))
    columns.extend([codes[series].astype(float), h.astype(float), np.log1p(scale)])
    columns.extend(take(stats.values, origin - lag, lower, upper) / scale for lag in config.lags)
    windows = _windows(config, step)
    for window in windows:
        width = _cells(window, step, minimum=2)
        columns.extend(
            getattr(stats, stat)(origin, width, lower, upper) / scale
            for stat in config.window_stats
        )
    level_cells = _cells(windows[0], step, minimum=2) if windows else 2
    level = stats.mean(origin, level_cells, lower, upper)
    k = config.seasonal_smoothing
    for season in config.seasonal_lags:
        cells = _cells(season, step)
        past = stats.centered_mean(target - cells, k, lower, upper)
        # The smoothed cell reads k cells past its centre; beyond the origin that is the future.
        past[target - cells + k > origin] = np.nan
        then = stats.mean(origin - cells, level_cells, lower, upper)
        ratio = np.where(then > MIN_SCALE, level / np.where(then > MIN_SCALE, then, 1.0), np.nan)
        columns.extend([past / scale, past * ratio / scale])
    seconds = panel.starts[series] + (o + h) * step
    columns.extend(_calendar(seconds, config.calendar))
    for cov in panel.covariates.values():
        flat = np.concatenate(cov)
        columns.extend(take(flat, origin - lag, lower, upper) for lag in config.covariate_lags)
    for name in _event_names(config):
        flag = np.zeros(len(o))
        for event in config.events:
            if event.name == name:
                start, end = event.bounds()
                flag[(seconds >= start) & (seconds < end)] = 1.0
        columns.extend([flag])
    if config.burst_window is not None:
        share, excess, since = burst_features(stats, lengths, origin, config, step)
        columns.extend([share, excess / scale, since])
    return FeatureMatrix(
        X=columns.matrix(),
        names=tuple(names),
        series=series,
        origin=o,
        horizon=h,
        scale=scale,
    )


def burst_features(
    stats: WindowStats, lengths: np.ndarray, origin: np.ndarray, config: FeatureConfig, step: int
) -> np.ndarray:
    """Recent burst activity at each ``origin`` (a cell of the series laid end to end in
    ``stats``, of ``lengths`` cells each): rows share of burst cells in the trailing
    ``burst_window``, their mean excess per cell over the reference mean (not scaled), and
    the cells since the last burst over the window's cells (1 when none in it).

    A cell is a burst when it exceeds the mean of the ``burst_reference`` cells before it by
    more than ``burst_sigma`` of their standard deviations: it reads itself and earlier cells
    of its own series only, so the features at an origin read nothing after it.

    >>> values = np.array([1.0, 1.2, 0.9, 1.1, 1.0, 9.0, 1.0, 1.1])
    >>> config = FeatureConfig(burst_window="4s", burst_reference="4s", burst_sigma=3.0)
    >>> share, excess, since = burst_features(WindowStats(values), np.array([8]),
    ...                                       np.array([4, 5, 7]), config, 1)
    >>> share.tolist(), since.tolist()
    ([0.0, 0.25, 0.25], [1.0, 0.0, 0.5])
    """
    assert config.burst_window is not None  # built only when declared
    values = stats.values
    cells = np.arange(len(values))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    lower = np.repeat(starts, lengths)
    upper = np.repeat(starts + lengths, lengths)
    reference = _cells(config.burst_reference, step, minimum=2)
    before = np.where(cells > lower, cells - 1, -1)  # a series' first cell has no reference
    mean = stats.mean(before, reference, lower, upper)
    spread = stats.std(before, reference, lower, upper)
    excess = values - mean
    # Above a non-negative spread, so above the mean; False wherever either is NaN.
    burst = excess > config.burst_sigma * spread
    width = _cells(config.burst_window, step, minimum=2)
    within = lower[origin]
    share = WindowStats(burst.astype(float)).mean(origin, width, within)
    size = WindowStats(np.where(burst, excess, 0.0)).mean(origin, width, within)
    last = np.maximum.accumulate(np.where(burst, cells, -1))[origin]
    since = origin - last
    since = np.where((last >= within) & (since < width), since / width, 1.0)
    return np.vstack([share, size, since])


class _Columns:
    """The feature matrix, written one float32 column at a time.

    Each column is computed in float64 and rounded to float32 as it is stored, as stacking
    every float64 column and converting the stack would round it, so the matrix is the same;
    but only the columns being computed are ever held in float64, not all of them beside
    their stacked copy (about five times the matrix's own size at the peak).
    """

    def __init__(self, rows: int, width: int) -> None:
        self.X = np.empty((rows, width), dtype=np.float32)
        self.filled = 0

    def extend(self, columns: Iterable[np.ndarray]) -> None:
        for column in columns:
            self.X[:, self.filled] = column
            self.filled += 1

    def matrix(self) -> np.ndarray:
        if self.filled != self.X.shape[1]:  # an unwritten column would hold garbage
            raise RuntimeError(f"{self.filled} feature columns built for {self.X.shape[1]} names")
        return self.X


def _calendar(seconds: np.ndarray, names: Sequence[str]) -> list[np.ndarray]:
    minute_of_day = (seconds % 86400) / 60.0
    # 1970-01-01 was a Thursday: shift so that Monday is 0, as pandas counts.
    day_of_week = ((seconds // 86400) + 3) % 7
    available = {
        "minute_of_day": minute_of_day,
        "minute_of_hour": minute_of_day % 60.0,
        "hour": np.floor(minute_of_day / 60.0),
        "day_of_week": day_of_week.astype(float),
        "is_weekend": (day_of_week >= 5).astype(float),
    }
    return [available[name] for name in names]


def target_values(panel: Panel, matrix: FeatureMatrix) -> np.ndarray:
    """Observed value at each row's target time (NaN where missing or beyond the data)."""
    out = np.full(len(matrix.origin), np.nan)
    for s in range(len(panel.names)):
        rows = matrix.series == s
        out[rows] = take(panel.values[s], matrix.origin[rows] + matrix.horizon[rows])
    return out


def window_target(
    values: np.ndarray | WindowStats,
    origins: np.ndarray,
    first: int,
    last: int,
    upper: np.ndarray | int | None = None,
) -> np.ndarray:
    """Largest observed value over cells ``origin + first .. origin + last`` of each origin:
    what a plan over that window must cover. NaN where the window runs past the series'
    data (cell ``upper``, default the end of ``values``) or holds no observation.

    >>> window_target(np.array([1.0, 5.0, 2.0, np.nan, 3.0]), np.array([0, 1, 2]), 1, 2).tolist()
    [5.0, 2.0, 3.0]
    """
    stats = values if isinstance(values, WindowStats) else WindowStats(values)
    origins = np.asarray(origins, dtype=np.int64)
    return stats.max(origins + last, last - first + 1, origins + first, upper)


def window_targets(panel: Panel, matrix: FeatureMatrix, first: int, last: int) -> np.ndarray:
    """:func:`window_target` of every row's series and origin (``matrix.horizon`` unused)."""
    out = np.full(len(matrix.origin), np.nan)
    for s in range(len(panel.names)):
        rows = matrix.series == s
        out[rows] = window_target(panel.values[s], matrix.origin[rows], first, last)
    return out


def with_seasonal_windows(
    panel: Panel, matrix: FeatureMatrix, first: int, last: int, config: FeatureConfig
) -> FeatureMatrix:
    """``matrix`` with, per seasonal lag, the largest value over the same window one season
    earlier (cells ``origin - season + first .. origin - season + last``), divided by the
    scale: the seasonal naive forecast of a window's maximum. NaN where that window reaches
    past the origin (a season shorter than the window) or before the series' start."""
    columns, names = [], []
    for season in config.seasonal_lags:
        cells = _cells(season, panel.step)
        column = np.full(len(matrix.origin), np.nan)
        if last <= cells:
            for s in range(len(panel.names)):
                rows = np.flatnonzero((matrix.series == s) & (matrix.origin - cells + first >= 0))
                past = matrix.origin[rows] - cells
                column[rows] = window_target(panel.values[s], past, first, last)
        columns.append(column / matrix.scale)
        names.append(f"seasonal_{season}_window_max")
    if not columns:
        return matrix
    X = np.hstack([matrix.X, np.column_stack(columns).astype(np.float32)])
    return replace(matrix, X=X, names=(*matrix.names, *names))
