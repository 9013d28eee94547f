"""The line training logs about missing points: what they are and what happens to them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from training.sources.ranges import SeriesReport, describe_missing, missing_ranges

GRID = pd.date_range("2024-05-01", periods=12, freq="1h", tz="UTC")
NAN = np.nan


def report(values: list[float]) -> SeriesReport:
    array = np.array(values)
    received = int(np.isfinite(array).sum())
    return SeriesReport("viral", "value", "q", len(GRID), received, 1, missing_ranges(array, GRID))


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (
            [NAN, NAN, NAN, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            ["3 of 12 points missing", ": 3 before its first value"],
        ),
        (
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, NAN, NAN],
            ["2 of 12 points missing", ": 2 after its last value"],
        ),
        (
            [1, 1, NAN, 1, NAN, NAN, NAN, 1, 1, 1, 1, 1],
            [
                ": 4 in 2 gap(s) inside it",
                "the longest from 2024-05-01 04:00 UTC to 2024-05-01 06:00 UTC",
            ],
        ),
        (
            [NAN, 1, 1, NAN, NAN, 1, 1, 1, 1, 1, 1, NAN],
            [": 1 before its first value, 1 after its last value, 2 in 1 gap(s) inside it"],
        ),
    ],
    ids=["trace-starts-late", "trace-ends-early", "outages-inside", "all-three"],
)
def test_says_where_the_points_are_missing(values: list[float], says: list[str]) -> None:
    line = describe_missing(report(values), GRID[0], GRID[-1])
    assert line.startswith("workload viral (value): ")
    assert "left missing rather than interpolated" in line
    for part in says:
        assert part in line
