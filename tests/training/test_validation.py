"""check_history: what the history is measured on, and what it refuses."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from training.exceptions import HistoryValidationError
from training.validation import check_history, series_parts

STEP = 300


def history(values: np.ndarray) -> pd.DataFrame:
    times = pd.date_range("2026-01-01", periods=len(values), freq=f"{STEP}s", tz="UTC")
    return pd.DataFrame({"series": "chat", "timestamp": times, "value": values})


def test_missing_cells_before_the_first_value_are_not_a_gap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    values = np.r_[np.full(576, np.nan), np.sin(np.arange(1152)) + 2]  # a late workload
    with caplog.at_level(logging.INFO, logger="training.validation"):
        (check,) = check_history(
            history(values), STEP, min_history=86400, max_gap_fraction=0.1, dead_window=3600
        )
    assert check.gap_fraction == 0.0 and check.cells == 1728 and check.observed_cells == 1152
    # the count and the share are of the same span
    assert "history of chat: 1152 cells from its first value to its last, 0.0% of them missing" in (
        caplog.text
    )


def test_a_gap_inside_the_span_beyond_the_limit_is_refused() -> None:
    values = np.sin(np.arange(1152)) + 2
    values[100:400] = np.nan
    with pytest.raises(HistoryValidationError, match=r"26.0% of cells are missing, more than"):
        check_history(
            history(values), STEP, min_history=86400, max_gap_fraction=0.1, dead_window=3600
        )


def test_series_parts_are_the_groups_of_the_series() -> None:
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "series": rng.choice(["b", "a", "c"], 40),
            "timestamp": pd.to_datetime(rng.integers(0, 10**6, 40), unit="s", utc=True),
            "value": rng.random(40),
        },
        index=pd.RangeIndex(2, 42, name="line"),
    )
    grouped = list(frame.groupby("series", sort=True))
    parts = list(series_parts(frame))
    assert [name for name, _ in parts] == [name for name, _ in grouped]
    for (_, got), (_, want) in zip(parts, grouped, strict=True):
        pd.testing.assert_frame_equal(got, want)
