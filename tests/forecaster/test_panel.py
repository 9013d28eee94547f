"""A long frame becomes a panel in one pass over its sorted cells, as one group per series
would make it; a series off its grid is named with the cells that break it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.exceptions import DataValidationError
from forecaster.panel import Panel

STEP = 60
T0 = pd.Timestamp("2026-03-01", tz="UTC")


def _by_group(frame: pd.DataFrame, covariates: tuple[str, ...]) -> Panel:
    """The reference: one pandas group per series."""
    parts = list(frame.sort_values(["series", "timestamp"]).groupby("series", sort=True))
    return Panel(
        step=STEP,
        names=tuple(str(name) for name, _ in parts),
        starts=np.array([int(p["timestamp"].iloc[0].timestamp()) for _, p in parts]),
        values=tuple(p["value"].to_numpy(dtype=float) for _, p in parts),
        covariates={c: tuple(p[c].to_numpy(dtype=float) for _, p in parts) for c in covariates},
    )


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    offsets=st.lists(st.integers(0, 20), min_size=6, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_the_panel_is_the_one_of_a_group_per_series(lengths, offsets, seed):
    rng = np.random.default_rng(seed)
    parts = []
    for k, n in enumerate(lengths):
        values = rng.normal(size=n)
        values[rng.random(n) < 0.2] = np.nan
        stamps = T0 + pd.to_timedelta((offsets[k] + np.arange(n)) * STEP, unit="s")
        parts.append(pd.DataFrame({"series": f"w{(7 * k) % 10}{k}", "timestamp": stamps,
                                   "value": values, "gpu": rng.uniform(size=n)}))  # fmt: skip
    frame = pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=seed)
    panel = Panel.from_frame(frame, STEP, covariates=("gpu",))
    reference = _by_group(frame, ("gpu",))
    assert panel.names == reference.names
    np.testing.assert_array_equal(panel.starts, reference.starts)
    for got, want in zip(panel.values, reference.values, strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(panel.covariates["gpu"], reference.covariates["gpu"], strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_series_off_its_grid_is_named_with_the_two_cells():
    on_grid = T0 + pd.to_timedelta(np.arange(4) * STEP, unit="s")
    frame = pd.DataFrame(
        {
            "series": ["a"] * 4 + ["b"] * 4,
            # b skips a cell after its second; from a's last cell back to b's first is no gap
            "timestamp": [*on_grid, *on_grid[[0, 1, 3]], on_grid[3] + pd.Timedelta(minutes=1)],
            "value": np.arange(8.0),
        }
    )  # fmt: skip
    with pytest.raises(
        DataValidationError,
        match=r"series 'b' .* 2026-03-01 00:01:00\+00:00 is followed by 2026-03-01 00:03:00",
    ):
        Panel.from_frame(frame, STEP)  # fmt: skip


def test_an_empty_frame_is_an_empty_panel():
    frame = pd.DataFrame({"series": [], "timestamp": pd.to_datetime([], utc=True), "value": []})
    panel = Panel.from_frame(frame, STEP)
    assert panel.names == () and panel.values == () and len(panel.starts) == 0


def test_a_sorted_frame_is_the_panel_of_its_shuffle_and_keeps_its_own_memory():
    rng = np.random.default_rng(3)
    parts = [
        pd.DataFrame(
            {
                "series": name,
                "timestamp": T0 + pd.to_timedelta(np.arange(n) * STEP, unit="s"),
                "value": rng.normal(size=n),
            }
        )
        for name, n in (("a", 5), ("b", 3), ("c", 7))
    ]
    ordered = pd.concat(parts, ignore_index=True)  # as validate_frame leaves it: not sorted again
    panel = Panel.from_frame(ordered, STEP)
    reference = Panel.from_frame(ordered.sample(frac=1.0, random_state=3), STEP)
    assert panel.names == reference.names
    np.testing.assert_array_equal(panel.starts, reference.starts)
    for got, want in zip(panel.values, reference.values, strict=True):
        np.testing.assert_array_equal(got, want)
        assert not np.shares_memory(got, ordered["value"].to_numpy())
