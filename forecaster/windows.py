"""Trailing-window statistics at chosen cells, from prefix sums.

A feature row needs a window statistic at its origin only. Computing a rolling statistic over
whole series for that (what ``pandas.Series.rolling`` does) costs every cell of every series for
every window on every refresh; prefix sums give any window's count, sum and sum of squares in
constant time, so the cost follows the number of origins asked for. Several series can share
one concatenated array: each query carries the bounds ``[lower, upper)`` of its own series, and
windows never cross them. Missing cells (NaN) are skipped, like pandas' rolling with
``min_periods=1``.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

Bound = np.ndarray | int


class WindowStats:
    """Window statistics of ``values`` ending at (and including) any cells.

    >>> stats = WindowStats(np.array([1.0, 2.0, np.nan, 4.0]))
    >>> stats.mean(np.array([3]), 3).tolist()  # cells 1..3, NaN skipped
    [3.0]
    >>> stats.max(np.array([1, 3]), 2).tolist()
    [2.0, 4.0]
    >>> stats.mean(np.array([3]), 3, lower=3).tolist()  # a series that starts at cell 3
    [4.0]
    """

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.asarray(values, dtype=float)

    # Each prefix array is one pass over every cell of every series: build only those asked for.
    @cached_property
    def _finite(self) -> np.ndarray:
        return np.isfinite(self.values)

    @cached_property
    def _sum(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(np.where(self._finite, self.values, 0.0))])

    @cached_property
    def _squares(self) -> np.ndarray:
        zeroed = np.where(self._finite, self.values, 0.0)
        return np.concatenate([[0.0], np.cumsum(zeroed * zeroed)])

    @cached_property
    def _count(self) -> np.ndarray:
        if self._finite.all():
            return np.arange(len(self.values) + 1)
        return np.concatenate([[0], np.cumsum(self._finite)])

    @cached_property
    def _padded(self) -> np.ndarray:
        # One NaN past the end lets reduceat take an end bound equal to the length.
        return np.append(self.values, np.nan)

    def _bounds(
        self, end: np.ndarray, width: Bound, lower: Bound, upper: Bound | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Half-open prefix bounds ``[lo, hi)`` of each window and its observed-cell count."""
        end = np.asarray(end, dtype=np.int64)
        upper = len(self.values) if upper is None else upper
        inside = (end >= lower) & (end < upper)
        hi = np.where(inside, end + 1, 0)
        lo = np.where(inside, np.maximum(end - np.asarray(width) + 1, lower), 0)
        count = self._count[hi] - self._count[lo]
        return lo, hi, count

    def mean(
        self, end: np.ndarray, width: Bound, lower: Bound = 0, upper: Bound | None = None
    ) -> np.ndarray:
        """Mean of the ``width`` cells ending at each of ``end`` (NaN where none observed)."""
        lo, hi, count = self._bounds(end, width, lower, upper)
        total = self._sum[hi] - self._sum[lo]
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    def std(
        self, end: np.ndarray, width: Bound, lower: Bound = 0, upper: Bound | None = None
    ) -> np.ndarray:
        """Sample standard deviation (NaN below two observed cells), as pandas computes it."""
        lo, hi, count = self._bounds(end, width, lower, upper)
        total = self._sum[hi] - self._sum[lo]
        squares = self._squares[hi] - self._squares[lo]
        safe = np.maximum(count, 2)
        variance = (squares - total * total / safe) / (safe - 1)
        return np.where(count > 1, np.sqrt(np.clip(variance, 0.0, None)), np.nan)

    def max(
        self, end: np.ndarray, width: Bound, lower: Bound = 0, upper: Bound | None = None
    ) -> np.ndarray:
        """Largest observed value of each window (NaN where none observed)."""
        lo, hi, count = self._bounds(end, width, lower, upper)
        if len(lo) == 0:
            return np.empty(0)
        # reduceat over interleaved [lo, hi) bounds: the even results are the windows.
        bounds = np.column_stack([lo, hi]).ravel()
        largest = np.fmax.reduceat(self._padded, bounds)[::2]
        return np.where(count > 0, largest, np.nan)

    def expanding_mean(
        self, end: np.ndarray, lower: Bound = 0, upper: Bound | None = None
    ) -> np.ndarray:
        """Mean of every cell of the series up to each of ``end``."""
        end = np.asarray(end, dtype=np.int64)
        return self.mean(end, end - lower + 1, lower, upper)

    def centered_mean(
        self, centre: np.ndarray, half_width: int, lower: Bound = 0, upper: Bound | None = None
    ) -> np.ndarray:
        """Mean of the cells within ``half_width`` of each centre, clipped to its series
        (NaN where the centre itself lies outside it)."""
        upper = len(self.values) if upper is None else upper
        centre = np.asarray(centre, dtype=np.int64)
        inside = (centre >= lower) & (centre < upper)
        end = np.minimum(centre + half_width, np.asarray(upper) - 1)
        start = np.maximum(centre - half_width, lower)
        out = self.mean(np.where(inside, end, -1), end - start + 1, lower, upper)
        return np.where(inside, out, np.nan)
