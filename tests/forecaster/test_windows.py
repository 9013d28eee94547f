from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.windows import WindowStats

values = st.lists(
    st.one_of(st.floats(0, 1e4, allow_nan=False), st.just(float("nan"))), min_size=1, max_size=60
)


@settings(max_examples=60, deadline=None)
@given(values=values, width=st.integers(1, 20), split=st.floats(0, 1))
def test_window_statistics_equal_pandas_rolling_within_each_series(values, width, split):
    y = np.asarray(values)
    # Prefix sums lose absolute precision in proportion to the largest value they carried.
    atol = 1e-9 * max(np.nanmax(np.abs(y), initial=0.0), 1.0)
    cut = int(split * len(y))
    stats = WindowStats(y)
    # Two series side by side: [0, cut) and [cut, n); windows never cross the boundary.
    for lower, upper in ((0, cut), (cut, len(y))):
        if upper == lower:
            continue
        rolling = pd.Series(y[lower:upper]).rolling(width, min_periods=1)
        ends = np.arange(lower, upper)
        for stat in ("mean", "max", "std"):
            expected = getattr(rolling, stat)().to_numpy()
            got = getattr(stats, stat)(ends, width, lower, upper)
            np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e3 * atol, equal_nan=True)
        part = pd.Series(y[lower:upper])
        np.testing.assert_allclose(
            stats.expanding_mean(ends, lower, upper),
            part.expanding(min_periods=1).mean(),
            rtol=1e-9,
            atol=atol,
            equal_nan=True,
        )
        np.testing.assert_allclose(
            stats.centered_mean(ends, 2, lower, upper),
            part.rolling(5, center=True, min_periods=1).mean(),
            rtol=1e-9,
            atol=atol,
            equal_nan=True,
        )


def test_cells_outside_the_series_give_nan():
    stats = WindowStats(np.array([1.0, 2.0, 3.0, 4.0]))
    assert np.isnan(stats.mean(np.array([-1, 4]), 2)).all()
    assert np.isnan(stats.centered_mean(np.array([1]), 1, lower=2, upper=4)).all()
    assert np.isnan(stats.max(np.array([1]), 2, lower=2)).all()
