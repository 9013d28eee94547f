"""The data contract: long frames of demand, validated and put on a regular grid.

A *long frame* has one row per (series, timestamp): a series id column, a timestamp column and
a value column, plus optional covariate columns. Column names are parameters (defaults
``series``, ``timestamp``, ``value``). After :func:`validate_frame` timestamps are tz-aware UTC
and rows are sorted; after :func:`regularize` every series sits on a grid of ``step`` seconds
aligned to the Unix epoch, short gaps are interpolated and long gaps stay ``NaN`` so that no
model ever learns from an invented value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from forecaster.exceptions import (
    ConfigError,
    DataValidationError,
    NotEnoughHistoryError,
    shown,
)

_SHOWN = 5  # offending rows echoed in an error message
_LAST_SECOND = pd.Timestamp.max.timestamp() - 1  # Unix seconds pandas can hold
_CLOCK_WORDS = ("now", "today")
# Longest gap, in cells, interpolated rather than left missing.
DEFAULT_MAX_FILL = 3
MAX_VALUE = 1e12
"""Default bound on the magnitude of a demand or covariate value (units per second).

No inference workload serves a trillion requests per second; a value past it is a unit or
parsing mistake, and left in it would size a simulated cluster by it.
"""
MAX_GRID_CELLS = 5_000_000
"""Most grid cells one series may span after :func:`regularize` (ten years at 1 minute)."""
FILE_LINE = "line"
"""Name of the index of a frame whose labels are the line numbers of the file it was read
from: errors then name those lines, the ones a user opens the file at, instead of rows."""


@dataclass(frozen=True)
class Columns:
    """Names of the columns of a long frame."""

    id_col: str = "series"
    time_col: str = "timestamp"
    target_col: str = "value"


DEFAULT_COLUMNS = Columns()


def _plain(value: object) -> object:
    """numpy scalars print as ``np.float64(1.0)`` and times as ``Timestamp('...')``, cut by
    the echo's bound; users want ``1.0`` and the time."""
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value.item() if isinstance(value, np.generic) else value


def _rows(index: pd.Index, values: pd.Series | None = None) -> str:
    rows = list(index[:_SHOWN])
    if values is None:
        text = ", ".join(_label(i) for i in rows)
    else:
        text = ", ".join(f"{_label(i)}: {shown(_plain(values.loc[i]), 40)}" for i in rows)
    more = f" and {len(index) - _SHOWN} more" if len(index) > _SHOWN else ""
    noun = "line" if index.name == FILE_LINE else "row"
    return f"{noun}{'s' if len(index) > 1 else ''} {text}{more}"


def _label(row: object) -> str:
    """A row label as text: a number as it is, anything else bounded."""
    text = str(_plain(row))
    return text if len(text) <= 40 else shown(row, 40)


def _from_unix_seconds(values: pd.Series) -> pd.Series:
    """Unix seconds as UTC timestamps, ``NaT`` where missing or outside pandas' nanosecond
    range (years 1677..2262), which are unparseable like any other bad value.

    Whole seconds and nanoseconds are converted apart, in integers: pandas' own conversion of
    float seconds raised ``FloatingPointError`` on a column whose out-of-range values were
    already masked to NaN, depending on what the process had run before (the CSV property
    test found it).
    """
    seconds = values.to_numpy(dtype=float, na_value=np.nan)
    usable = np.abs(seconds) < _LAST_SECOND  # False for NaN
    whole = np.floor(np.where(usable, seconds, 0.0))
    nanos = np.round((np.where(usable, seconds, 0.0) - whole) * 1e9)
    stamps = whole.astype(np.int64) * 10**9 + nanos.astype(np.int64)
    parsed = pd.Series(pd.to_datetime(stamps, unit="ns", utc=True), index=values.index)
    return parsed.where(usable)


def parse_timestamps(values: pd.Series, *, column: str) -> pd.Series:
    """Parse ISO-8601 strings (naive means UTC) or Unix seconds into tz-aware UTC timestamps.

    Raises
    ------
    DataValidationError
        Naming the column and the first unparseable rows with their values.
    """
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        parsed = values.dt.tz_convert("UTC")
    elif pd.api.types.is_datetime64_dtype(values.dtype):
        parsed = values.dt.tz_localize("UTC")
    elif pd.api.types.is_numeric_dtype(values.dtype):
        parsed = _from_unix_seconds(values)
    else:
        parsed = pd.to_datetime(values, utc=True, format="ISO8601", errors="coerce")
        # pandas reads these two words as the wall clock's time: no row's time is that.
        parsed = parsed.mask(values.isin(_CLOCK_WORDS))
    bad = parsed.isna() & values.notna() | values.isna()
    if bad.any():
        raise DataValidationError(
            f"column {shown(column, 60)} has unparseable timestamps (expected ISO-8601 or Unix "
            "seconds) "
            f"at {_rows(values.index[bad], values)}"
        )
    return parsed


def validate_frame(
    frame: pd.DataFrame,
    *,
    columns: Columns = DEFAULT_COLUMNS,
    covariates: Sequence[str] = (),
    min_rows: int = 2,
    allow_missing: bool = False,
    max_value: float = MAX_VALUE,
) -> pd.DataFrame:
    """Check a long frame against the data contract and return a clean, sorted copy.

    Parameters
    ----------
    frame
        Long frame with the id, time and target columns named by ``columns``.
    columns
        Column names.
    covariates
        Extra numeric columns to keep and check (NaN allowed there: covariates may be patchy).
    min_rows
        Fewest observed rows a series may have.
    allow_missing
        Accept NaN targets (a regularized frame marks long gaps with NaN). Infinite values and
        negative demand are rejected either way.
    max_value
        Values of the target and the covariates must be below this in magnitude.

    Raises
    ------
    DataValidationError
        For a missing column, unparseable or duplicate timestamps, non-numeric, NaN/inf or
        negative values, or values of ``max_value`` or more; the message names the column and
        the offending rows and values.
    NotEnoughHistoryError
        When a series has fewer than ``min_rows`` observed rows.
    """
    needed = [columns.id_col, columns.time_col, columns.target_col, *covariates]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise DataValidationError(
            f"frame lacks column(s) {shown(missing)}; it has {shown(list(frame.columns))}"
        )
    out = frame[needed].copy()
    out[columns.id_col] = out[columns.id_col].astype(str)
    out[columns.time_col] = parse_timestamps(out[columns.time_col], column=columns.time_col)
    for col in (columns.target_col, *covariates):
        out[col] = _numeric(out[col], column=col)
    target = out[columns.target_col]
    if not allow_missing and target.isna().any():
        raise DataValidationError(
            f"column {shown(columns.target_col, 60)} has no value (an empty field or NaN) at "
            f"{_rows(target.index[target.isna()])}"
        )
    infinite = np.isinf(target.to_numpy(dtype=float))
    if infinite.any():
        raise DataValidationError(
            f"column {shown(columns.target_col, 60)} has infinite values at "
            f"{_rows(target.index[infinite], target)}"
        )
    negative = target < 0
    if negative.any():
        raise DataValidationError(
            f"column {shown(columns.target_col, 60)} has negative demand at "
            f"{_rows(target.index[negative], target)}"
        )
    for col in (columns.target_col, *covariates):
        _check_range(out, col, max_value, columns)
    ordered = out.sort_values([columns.id_col, columns.time_col], ignore_index=True)
    ids = ordered[columns.id_col].to_numpy()
    same = ids[1:] == ids[:-1]
    times = ordered[columns.time_col].array
    # Sorted, a repeated (id, time) pair is two neighbours: DataFrame.duplicated hashed every
    # pair, 7 columns' worth of memory at its peak (2.3 GiB at 43 million rows).
    if (same & (times[1:] == times[:-1])).any():
        duplicated = out.duplicated([columns.id_col, columns.time_col], keep=False)
        raise DataValidationError(
            f"duplicate ({columns.id_col}, {columns.time_col}) pairs at "
            f"{_rows(out.index[duplicated], out[columns.time_col])}"
        )
    # Each series' observed rows counted on its run of sorted rows: a groupby of the observed
    # rows copied them and hashed their ids (7 columns' worth of allocations, traced).
    starts = np.flatnonzero(np.r_[True, ~same]) if len(ids) else np.empty(0, np.intp)
    observed = ordered[columns.target_col].notna().to_numpy()
    counts = pd.Series(np.add.reduceat(observed, starts, dtype=np.int64), index=ids[starts])
    if (counts < min_rows).any():  # named in the order the series come in
        counts = counts.reindex(out[columns.id_col].unique())
    short = counts[counts < min_rows]
    if len(short):
        raise NotEnoughHistoryError(
            f"series need at least {min_rows} observed rows; too short: "
            + ", ".join(f"{shown(name, 40)} has {n}" for name, n in short.head(_SHOWN).items())
            + (f" and {len(short) - _SHOWN} more" if len(short) > _SHOWN else "")
        )
    return ordered


def beyond_range(values: np.ndarray, limit: float = MAX_VALUE) -> np.ndarray:
    """Where ``values`` leave the sane range: infinite, or ``limit`` or more in magnitude
    (NaN is missing, not beyond it)."""
    with np.errstate(invalid="ignore"):
        return ~(np.abs(values) < limit) & ~np.isnan(values)


def _check_range(frame: pd.DataFrame, column: str, limit: float, columns: Columns) -> None:
    values = frame[column].to_numpy(dtype=float)
    beyond = beyond_range(values, limit)
    if beyond.any():
        # The frame is not sorted yet: its first offending row is the input's, named by the
        # file's line when it was read from one, else by its label, as every other check
        # of the frame names rows (a Parquet file's from 0).
        first = int(np.flatnonzero(beyond)[0])
        row = frame.iloc[first]
        where = _rows(frame.index[first : first + 1])
        raise DataValidationError(
            f"column {shown(column, 60)} has {int(beyond.sum())} value(s) beyond the sane range "
            f"(finite, below {limit:g} in magnitude); first at {where} "
            f"(series {shown(row[columns.id_col])}, {row[columns.time_col].isoformat()}): "
            f"{values[first]:g}"
        )


def check_grid(series: object, start: pd.Timestamp, end: pd.Timestamp, step: int) -> int:
    """Cells of a ``step``-second grid from ``start`` to ``end``, at most :data:`MAX_GRID_CELLS`.

    Raises
    ------
    DataValidationError
        When the grid would be larger: a stray timestamp years away, or too fine a step.
    """
    cells = int((end - start).total_seconds() // step) + 1
    if cells > MAX_GRID_CELLS:
        raise DataValidationError(
            f"series {shown(series)} spans {start.isoformat()} to {end.isoformat()}: "
            f"{cells:,} cells of {step}s, more than the limit of {MAX_GRID_CELLS:,}; "
            "check for a stray timestamp or use a coarser step"
        )
    return cells


def _numeric(values: pd.Series, *, column: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(values.dtype):
        raise DataValidationError(f"column {shown(column, 60)} must be numeric, got booleans")
    converted = pd.to_numeric(values, errors="coerce")
    bad = converted.isna() & values.notna()
    if bad.any():
        raise DataValidationError(
            f"column {shown(column, 60)} has non-numeric values at "
            f"{_rows(values.index[bad], values)}"
        )
    return converted.astype(float)


def infer_step(frame: pd.DataFrame, *, columns: Columns = Columns()) -> int:
    """Most common spacing between consecutive timestamps of a series, in whole seconds.

    Raises
    ------
    NotEnoughHistoryError
        If no series has two timestamps.
    """
    ids, times = frame[columns.id_col], frame[columns.time_col]
    if not sorted_by_series(ids, times):
        ordered = frame[[columns.id_col, columns.time_col]].sort_values(
            [columns.id_col, columns.time_col]
        )
        ids, times = ordered[columns.id_col], ordered[columns.time_col]
    same_series = ids.eq(ids.shift()).to_numpy()[1:]
    gaps = np.diff(times.astype("int64").to_numpy()).astype(float)  # as Series.diff
    diffs = gaps[same_series & (gaps > 0)]
    if not diffs.size:
        raise NotEnoughHistoryError("cannot infer the step: no series has two distinct timestamps")
    # The smallest of the most common gaps, as Series.mode gives it first: that hashed every
    # gap, np.unique sorts them (4 columns' worth of memory less).
    values, counts = np.unique(diffs, return_counts=True)
    step = round(float(values[np.argmax(counts)]) / 1e9)
    return max(step, 1)


def sorted_by_series(ids: pd.Series, times: pd.Series) -> bool:
    """Whether rows are already sorted by id, then time, as :func:`validate_frame` leaves them
    (string ids, no missing time): sorting them again, as a stable sort, changes nothing.

    A sort of the id and time columns of 43 million rows held 7 columns' worth of memory
    (2.3 GiB); this check holds 2.
    """
    if not len(ids):
        return True
    if isinstance(ids.dtype, pd.CategoricalDtype):
        return False  # sorted by its categories' order, which need not be the names'
    names = ids.to_numpy()
    same = names[1:] == names[:-1]
    heads = names[np.flatnonzero(np.r_[True, ~same])]
    if not all(isinstance(name, str) for name in heads):
        return False
    if any(a >= b for a, b in pairwise(heads)):
        return False  # not in id order, or a series comes back further down
    if times.isna().any():
        return False
    return bool((np.diff(times.astype("int64").to_numpy())[same] >= 0).all())


def regularize(
    frame: pd.DataFrame,
    step: int,
    *,
    columns: Columns = DEFAULT_COLUMNS,
    covariates: Sequence[str] = (),
    max_fill: int = DEFAULT_MAX_FILL,
) -> pd.DataFrame:
    """Put every series on an epoch-aligned grid of ``step`` seconds.

    Timestamps are floored to the grid; several values falling in one cell are averaged (demand
    is a rate, so the mean keeps its unit). Gaps of at most ``max_fill`` missing cells are
    filled by linear interpolation; longer gaps stay NaN so they are excluded from training
    targets and scoring.

    Parameters
    ----------
    frame
        A frame that passed :func:`validate_frame`.
    step
        Grid step in seconds.
    columns, covariates
        As in :func:`validate_frame`.
    max_fill
        Longest gap, in cells, that is interpolated.
    """
    if step <= 0:
        raise ConfigError(f"`step` must be a positive number of seconds, got {step!r}")
    if max_fill < 0:
        raise ConfigError(f"`max_fill` must be >= 0, got {max_fill!r}")
    value_cols = [columns.target_col, *covariates]
    floored = frame.assign(**{columns.time_col: frame[columns.time_col].dt.floor(f"{step}s")})
    grouped = floored.groupby([columns.id_col, columns.time_col], sort=True)[value_cols].mean()
    parts = []
    for series_id, part in grouped.groupby(level=0, sort=True):
        part = part.droplevel(0)
        check_grid(series_id, part.index[0], part.index[-1], step)
        grid = pd.date_range(part.index[0], part.index[-1], freq=f"{step}s", name=columns.time_col)
        part = part.reindex(grid)
        for col in value_cols:
            part[col] = fill_short_gaps(part[col].to_numpy(), max_fill)
        part.insert(0, columns.id_col, series_id)
        parts.append(part.reset_index())
    return pd.concat(parts, ignore_index=True)[[columns.id_col, columns.time_col, *value_cols]]


def fill_short_gaps(values: np.ndarray, max_fill: int) -> np.ndarray:
    """Linearly interpolate interior NaN runs of at most ``max_fill`` cells; keep the rest NaN.

    >>> fill_short_gaps(np.array([1.0, np.nan, 3.0, np.nan, np.nan, 6.0]), 1)
    array([ 1.,  2.,  3., nan, nan,  6.])
    """
    out = np.asarray(values, dtype=float).copy()
    observed = np.flatnonzero(~np.isnan(out))
    if observed.size == 0 or max_fill == 0:
        return out
    for start, end in missing_runs(out):
        interior = start > 0 and end < len(out)
        if interior and end - start <= max_fill:
            out[start:end] = np.interp(np.arange(start, end), observed, out[observed])
    return out


def long_gaps(values: np.ndarray, max_fill: int) -> list[tuple[int, int]]:
    """The NaN runs of ``values`` longer than ``max_fill`` cells, as ``(start, end)`` pairs.

    These are the gaps :func:`fill_short_gaps` leaves open, plus runs at either end longer
    than ``max_fill``.

    >>> long_gaps(np.array([1.0, np.nan, 3.0, np.nan, np.nan, 6.0, np.nan, np.nan]), 1)
    [(3, 5), (6, 8)]
    """
    return [(start, end) for start, end in missing_runs(values) if end - start > max_fill]


def missing_runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Each run of consecutive NaN in ``values``, as ``[start, end)`` index pairs in order.

    >>> missing_runs(np.array([np.nan, 1.0, np.nan, np.nan, 2.0]))
    [(0, 1), (2, 4)]
    """
    missing = np.isnan(np.asarray(values, dtype=float))
    # Run boundaries of the NaN mask: starts where it turns on, ends where it turns off.
    edges = np.diff(np.concatenate([[0], missing.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(start), int(end)) for start, end in zip(starts, ends, strict=True)]
