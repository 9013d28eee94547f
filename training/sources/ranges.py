"""Ranges of a regular time grid: request chunks and reports of missing points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.exceptions import ConfigError


@dataclass(frozen=True)
class TimeRange:
    """A closed range of grid points, ``start`` and ``end`` included."""

    start: pd.Timestamp
    end: pd.Timestamp
    points: int


@dataclass(frozen=True)
class SeriesReport:
    """What one query returned over the requested grid.

    ``column`` is ``"value"`` for the workload's demand query, or the covariate's name.
    """

    workload: str
    column: str
    query: str
    expected_points: int
    received_points: int
    requests: int
    missing: tuple[TimeRange, ...]

    @property
    def complete(self) -> bool:
        """True when every grid point has a finite value."""
        return not self.missing


def plan_chunks(start: int, end: int, step: int, max_points: int) -> list[tuple[int, int]]:
    """Split the grid ``start, start + step, ..., <= end`` into request ranges.

    Each range ``(first, last)`` holds at most ``max_points`` grid points, both ends on the
    grid; consecutive ranges are one step apart, so together they cover every grid point
    exactly once.

    Examples
    --------
    >>> plan_chunks(0, 600, 60, 4)
    [(0, 180), (240, 420), (480, 600)]
    """
    if step <= 0 or max_points < 1 or end < start:
        raise ConfigError(
            f"cannot plan chunks for start={start!r}, end={end!r}, step={step!r}, "
            f"max_points={max_points!r}"
        )
    span = (max_points - 1) * step
    chunks = []
    first = start
    while first <= end:
        last = min(first + span, end - (end - start) % step)
        chunks.append((first, last))
        first = last + step
    return chunks


def missing_ranges(values: np.ndarray, timestamps: pd.DatetimeIndex) -> tuple[TimeRange, ...]:
    """Contiguous runs of non-finite ``values``, as ranges of ``timestamps``."""
    missing = ~np.isfinite(values)
    if not missing.any():
        return ()
    edges = np.diff(np.concatenate(([0], missing.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return tuple(
        TimeRange(start=timestamps[int(s)], end=timestamps[int(e)], points=int(e - s + 1))
        for s, e in zip(starts, ends, strict=True)
    )


def describe_missing(report: SeriesReport, start: pd.Timestamp, end: pd.Timestamp) -> str:
    """One line on a report's missing points and what training does with them.

    Points before the series' first value or after its last (a trace that covers less than
    the window pulled) are told apart from gaps inside it (an outage of the metrics pipeline).

    Examples
    --------
    >>> grid = pd.date_range("2024-05-01", periods=6, freq="1h", tz="UTC")
    >>> values = np.array([np.nan, 1.0, np.nan, np.nan, 1.0, 1.0])
    >>> report = SeriesReport("chat", "value", "chat", 6, 3, 1, missing_ranges(values, grid))
    >>> print(describe_missing(report, grid[0], grid[-1]))
    workload chat (value): 3 of 6 points missing, left missing rather than interpolated \
(no forecast is fitted or scored on them): 1 before its first value, 2 in 1 gap(s) inside it \
(the longest from 2024-05-01 02:00 UTC to 2024-05-01 03:00 UTC)
    """
    outside = [r for r in report.missing if r.start == start or r.end == end]
    inside = [r for r in report.missing if r not in outside]
    parts = [
        f"{r.points} {'before its first' if r.start == start else 'after its last'} value"
        for r in outside
    ]
    if inside:
        longest = max(inside, key=lambda r: r.points)
        parts.append(
            f"{sum(r.points for r in inside)} in {len(inside)} gap(s) inside it (the longest "
            f"from {longest.start:%Y-%m-%d %H:%M} UTC to {longest.end:%Y-%m-%d %H:%M} UTC)"
        )
    return (
        f"workload {report.workload} ({report.column}): "
        f"{report.expected_points - report.received_points} of {report.expected_points} points "
        "missing, left missing rather than interpolated (no forecast is fitted or scored on "
        f"them): {', '.join(parts)}"
    )
