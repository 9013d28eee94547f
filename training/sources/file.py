"""History from CSV or Parquet files.

Three layouts are read:

* ``timestamp,value`` files: one series named after the file; ``value_col`` picks the value
  column when there are several numeric ones.
* long files with a series column (``series``, ``unique_id`` or ``workload``).
* arrival logs: one row per request at irregular times; arrivals are counted per grid step and
  turned into a rate per second (or, with ``value_col``, that column is summed per step, e.g.
  tokens per second).

Timestamps are ISO-8601 (naive means UTC) or Unix seconds.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from forecaster.exceptions import SHOWN_CHARS, DataValidationError, shown
from forecaster.frame import (
    FILE_LINE,
    Columns,
    check_grid,
    infer_step,
    parse_timestamps,
    regularize,
    validate_frame,
)
from training.exceptions import SourceError

TIME_NAMES = ("timestamp", "time", "ds", "date", "datetime")
SERIES_NAMES = ("series", "unique_id", "workload")
VALUE_NAMES = ("value", "y")
DEFAULT_ARRIVAL_STEP = 60


@dataclass(frozen=True)
class History:
    """A long frame on a regular grid, with the step and where it came from."""

    frame: pd.DataFrame
    step: int
    path: Path
    rows: int


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV (optionally compressed) or Parquet file into a frame."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"data file {str(path)!r} does not exist or is not a file")
    suffixes = "".join(path.suffixes).lower()
    try:
        if ".parquet" in suffixes or suffixes.endswith(".pq"):
            return pd.read_parquet(path)
        if ".csv" in suffixes or ".txt" in suffixes:
            return _numbered_by_line(_csv(path))
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {str(path)!r}: {str(exc)[:SHOWN_CHARS]}") from exc
    raise SourceError(
        f"data file {str(path)!r} must be .csv or .parquet, got {suffixes or 'no suffix'!r}"
    )


def _csv(path: Path) -> pd.DataFrame:
    """The CSV at ``path``, its blank lines kept as empty rows for :func:`_numbered_by_line`."""
    try:
        frame = pd.read_csv(path, skip_blank_lines=False)
    except pd.errors.ParserError as exc:
        raise SourceError(_field_count_error(path, exc)) from exc
    if not isinstance(frame.index, pd.RangeIndex):
        # pandas takes the extra leading fields of wider rows as an index and shifts every
        # column by them: a silent misreading, so refuse it (a wider later line fails anyway).
        raise SourceError(
            f"cannot read {str(path)!r}: its lines have {frame.index.nlevels} more field(s) "
            f"than its header's {len(frame.columns)} names, from line 2 on (a trailing "
            "separator?); give every column a name in the header"
        )
    if len(frame.columns) and all(_is_data(str(name)) for name in frame.columns):
        # pandas takes the first line as the header whatever it holds: that row would be lost
        # and a number taken for the value column's name
        raise SourceError(
            f"cannot read {str(path)!r}: its first line ({shown(','.join(frame.columns), 80)}) "
            "holds data, not column names; add a header line, e.g. timestamp,value"
        )
    return frame


def _field_count_error(path: Path, error: pd.errors.ParserError) -> str:
    """What a CSV parser error means, with the line it names shown (bounded): pandas' own
    message names the line but not what it holds."""
    found = _FIELD_COUNT.search(str(error))
    if found is None:
        return f"cannot read {str(path)!r}: {str(error).strip()[:SHOWN_CHARS]}"
    expected, number, seen = (int(g) for g in found.groups())
    text = _line(path, number)
    holds = "" if text is None else f": {shown(text)}"
    return (
        f"cannot read {str(path)!r}: line {number} has {seen} fields where the header has "
        f"{expected}{holds}; a stray separator, or a column missing from the header?"
    )


_FIELD_COUNT = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_OPENERS: dict[str, Callable[..., IO[str]]] = {
    ".csv": open,
    ".txt": open,
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
}
_CHUNK = 1 << 16


def _line(path: Path, number: int) -> str | None:
    """At most :data:`SHOWN_CHARS` characters of line ``number`` (from 1) of the CSV at
    ``path``, read a chunk at a time (a line may be of any length); ``None`` for a compression
    this does not open, or past the end."""
    opener = _OPENERS.get(path.suffix.lower())
    if opener is None:
        return None
    to_skip, kept = number - 1, ""
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as handle:
        while chunk := handle.read(_CHUNK):
            if to_skip and chunk.count("\n") < to_skip:
                to_skip -= chunk.count("\n")
                continue
            start = 0
            for _ in range(to_skip):
                start = chunk.index("\n", start) + 1
            to_skip = 0
            end = chunk.find("\n", start)
            kept += chunk[start:] if end < 0 else chunk[start:end]
            if end >= 0 or len(kept) > SHOWN_CHARS:
                return kept[: SHOWN_CHARS + 1].rstrip("\r")
    return kept.rstrip("\r") if not to_skip and kept else None


def _is_data(name: str) -> bool:
    """Whether a header field is a number or a time, as a data line's fields are."""
    try:
        float(name)
        return True
    except ValueError:
        pass
    if not any(ch.isdigit() for ch in name):  # "time", "value": names, whatever dateutil says
        return False
    try:
        pd.Timestamp(name)
    except (ValueError, OverflowError):
        return False
    return True


def _numbered_by_line(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` labelled by the line of the file each row was read from (the header is line
    1), so that errors name the line to look at; lines without a field (blank, or separators
    alone, as spreadsheets export) are counted, then dropped.

    A quoted field that spans lines breaks that count; such a frame keeps its row numbers.
    """
    text = frame.select_dtypes(include="object")
    if any(text[c].str.contains("\n", regex=False).any() for c in text.columns):
        return frame.dropna(how="all").reset_index(drop=True)
    frame.index = pd.RangeIndex(2, len(frame) + 2, name=FILE_LINE)
    return frame.dropna(how="all")


def _pick(names: tuple[str, ...], columns: list[str]) -> str | None:
    lowered = {c.lower(): c for c in columns}
    return next((lowered[n] for n in names if n in lowered), None)


def _is_arrival_log(times: pd.Series) -> bool:
    """Irregular timestamps: fewer than half of the gaps equal the most common gap."""
    gaps = times.sort_values().diff().dropna()
    if len(gaps) < 10:
        return False
    return bool((gaps == gaps.mode().iloc[0]).mean() < 0.5)


def read_series(
    path: str | Path,
    *,
    value_col: str | None = None,
    time_col: str | None = None,
    series_col: str | None = None,
    arrivals: bool | None = None,
    step: int | None = None,
) -> pd.DataFrame:
    """Read a file into a validated long frame (``series``, ``timestamp``, ``value``).

    Parameters
    ----------
    path
        CSV or Parquet file.
    value_col
        Column holding the demand (default: ``value``/``y``, or the only numeric column).
    time_col, series_col
        Column names (defaults: the first of the usual names present; the time column falls
        back to the first column, the series to the file name).
    arrivals
        Treat rows as arrivals to count; ``None`` detects irregular timestamps.
    step
        Counting step in seconds for arrival logs (default 60).
    """
    raw = read_table(path)
    columns = list(raw.columns)
    time_col = time_col or _pick(TIME_NAMES, columns) or columns[0]
    series_col = series_col or _pick(SERIES_NAMES, columns)
    named = (
        ("`time_col`", time_col),
        ("`series_col`", series_col),
        ("`value_col` (--value-col)", value_col),
    )
    for name, col in named:
        if col is not None and col not in columns:
            raise SourceError(
                f"{name} {shown(col)} is not a column of {str(path)!r}; columns: {shown(columns)}"
            )
    times = parse_timestamps(raw[time_col], column=time_col)
    series = (
        raw[series_col].astype(str) if series_col else pd.Series(Path(path).stem, index=raw.index)
    )
    if arrivals is None:
        arrivals = series_col is None and _is_arrival_log(times)
    if arrivals:
        return _count_arrivals(times, raw[value_col] if value_col else None, series, step)
    value_col = value_col or _value_column(raw, path, exclude={time_col, series_col})
    frame = pd.DataFrame({"series": series, "timestamp": times, "value": raw[value_col]})
    return validate_frame(frame)


def _value_column(raw: pd.DataFrame, path: str | Path, exclude: set[str | None]) -> str:
    candidates = [c for c in raw.columns if c not in exclude]
    named = _pick(VALUE_NAMES, candidates)
    if named:
        return named
    numeric = [c for c in candidates if pd.api.types.is_numeric_dtype(raw[c])]
    if len(numeric) == 1:
        return str(numeric[0])
    raise SourceError(
        f"cannot tell which column of {str(path)!r} holds the demand: candidates "
        f"{shown(numeric)}; "
        "pick one with --value-col"
    )


def _count_arrivals(
    times: pd.Series, weights: pd.Series | None, series: pd.Series, step: int | None
) -> pd.DataFrame:
    step = step or DEFAULT_ARRIVAL_STEP
    amount = np.ones(len(times)) if weights is None else pd.to_numeric(weights, errors="coerce")
    if np.isnan(np.asarray(amount, dtype=float)).any():
        raise DataValidationError("the weight column of the arrival log has non-numeric values")
    cells = times.dt.floor(f"{step}s")
    frame = pd.DataFrame({"series": series, "timestamp": cells, "value": amount})
    counted = frame.groupby(["series", "timestamp"], as_index=False)["value"].sum()
    parts = []
    for name, part in counted.groupby("series"):
        first, last = part["timestamp"].min(), part["timestamp"].max()
        check_grid(name, first, last, step)
        grid = pd.date_range(first, last, freq=f"{step}s")
        rate = part.set_index("timestamp")["value"].reindex(grid, fill_value=0.0) / step
        parts.append(pd.DataFrame({"series": name, "timestamp": grid, "value": rate.to_numpy()}))
    return validate_frame(pd.concat(parts, ignore_index=True))


def load_history(
    path: str | Path,
    *,
    step: int | None = None,
    value_col: str | None = None,
    arrivals: bool | None = None,
    max_fill: int = 3,
) -> History:
    """Read ``path`` and put it on a grid of ``step`` seconds (``None``: the data's own step)."""
    frame = read_series(path, value_col=value_col, arrivals=arrivals, step=step)
    rows = len(frame)
    step = step or infer_step(frame, columns=Columns())
    return History(regularize(frame, step, max_fill=max_fill), step, Path(path), rows)
