"""A fetched history's long frame is filled column by column in place: the same frame as one
frame per workload concatenated, which held the parts and the whole at once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from training.sources.base import on_grid

STEP = 60
START = 1_772_323_200


def _concatenated(series: dict[str, pd.Series], start: int, end: int) -> pd.DataFrame:
    """The reference: a frame per workload on the grid, concatenated."""
    grid = pd.to_datetime(np.arange(start, end + 1, STEP, dtype=np.int64), unit="s", utc=True)
    parts = [
        pd.DataFrame(
            {"series": name, "timestamp": grid, "value": values.reindex(grid).to_numpy(float)}
        )
        for name, values in series.items()
    ]
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("seed", range(5))
def test_the_frame_is_the_workloads_frames_concatenated(seed):
    rng = np.random.default_rng(seed)
    end = START + int(rng.integers(0, 30)) * STEP
    series = {}
    for name in ("web", "api", "batch")[: int(rng.integers(1, 4))]:
        cells = np.sort(rng.choice(np.arange(-5, 35), int(rng.integers(1, 20)), replace=False))
        index = pd.to_datetime(START + cells * STEP, unit="s", utc=True)
        series[name] = pd.Series(rng.random(len(cells)), index=index)
    fetched = on_grid(series, {name: name for name in series}, START, end, STEP)
    pd.testing.assert_frame_equal(fetched.frame, _concatenated(series, START, end))
    assert fetched.frame["series"].dtype == object


def test_no_workload_is_an_empty_frame_of_the_three_columns():
    # pandas' "No objects to concatenate" before: nothing asks for no workload
    fetched = on_grid({}, {}, START, START + STEP, STEP)
    assert fetched.frame.empty and list(fetched.frame.columns) == ["series", "timestamp", "value"]
    assert fetched.reports == ()
