"""Split-conformal calibration of quantile forecasts.

For each quantile level ``tau`` and each group (horizon), the calibrator learns the additive
offset ``delta`` that makes ``pred + delta`` exceed the observed value in a fraction ``tau`` of a
recent calibration window: ``delta`` is the ``tau`` empirical quantile of the scores
``y - pred`` (taken conservatively: the next order statistic up for ``tau >= 0.5``, down below).
Scores are in the model's scaled space, so one offset serves series of any level.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from forecaster.exceptions import ConfigError


def coverage(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Fraction of finite ``actual`` values at or below ``predicted``."""
    finite = np.isfinite(actual)
    if not finite.any():
        return float("nan")
    return float(np.mean(actual[finite] <= predicted[finite]))


def conformal_offsets(scores: np.ndarray, quantiles: Sequence[float]) -> np.ndarray:
    """The conformal offset of each level: the ``quantiles[j]`` empirical quantile of the
    scores ``y - pred`` in column ``j`` (the next order statistic up for ``tau >= 0.5``, down
    below).

    >>> conformal_offsets(np.array([[-2.0, -2.0], [1.0, 1.0], [2.0, 2.0]]), (0.1, 0.9))
    array([-2.,  2.])
    """
    return np.array(
        [
            np.quantile(scores[:, j], q, method="higher" if q >= 0.5 else "lower")
            for j, q in enumerate(quantiles)
        ]
    )


class ConformalCalibrator:
    """Per-group, per-quantile additive conformal offsets.

    Parameters
    ----------
    quantiles
        Levels of the columns of the predictions it will see.
    min_samples
        Fewest calibration rows a group needs for its own offsets; smaller groups use the
        offsets pooled over all groups.
    """

    def __init__(self, quantiles: Sequence[float], min_samples: int = 30) -> None:
        self.quantiles = tuple(quantiles)
        self.min_samples = min_samples

    @property
    def min_rows(self) -> int:
        """The fewest observed rows :meth:`fit` takes: ``min_samples`` for each half, the
        earlier learning the offsets its report scores on the later."""
        return 2 * self.min_samples

    def fit(
        self, actual: np.ndarray, predicted: np.ndarray, groups: np.ndarray
    ) -> ConformalCalibrator:
        """Learn offsets from rows in time order (``predicted`` has one column per quantile).

        The report compares coverage before and after on the later half of the window, with
        offsets learned on the earlier half, so the "after" figure is out of sample; the
        offsets kept are then learned on the whole window.
        """
        usable = np.isfinite(actual)
        actual, predicted, groups = actual[usable], predicted[usable], groups[usable]
        if len(actual) < self.min_rows:
            raise ConfigError(
                f"calibration needs at least {self.min_rows} observed rows, got {len(actual)}"
            )
        half = len(actual) // 2
        early = self._learn(actual[:half], predicted[:half], groups[:half])
        later = slice(half, None)
        adjusted = self._apply(early, predicted[later], groups[later])
        self.report_ = pd.DataFrame(
            {
                "quantile": self.quantiles,
                "coverage_before": [
                    coverage(actual[later], predicted[later][:, j])
                    for j in range(len(self.quantiles))
                ],
                "coverage_after": [
                    coverage(actual[later], adjusted[:, j]) for j in range(len(self.quantiles))
                ],
                "rows": len(actual) - half,
            }
        )
        self.offsets_ = self._learn(actual, predicted, groups)
        self.bias_ = self._median_scores(actual, predicted, groups)
        return self

    def unbiased(self) -> ConformalCalibrator:
        """These offsets less each group's median error of the median forecast: the spread of
        the errors without their shared bias, for a model refitted on the calibration window,
        which has learned that bias itself (a level shift there); unchanged without 0.5."""
        out = copy.copy(self)
        out.offsets_ = {g: o - self.bias_.get(g, 0.0) for g, o in self.offsets_.items()}
        return out

    def _median_scores(
        self, actual: np.ndarray, predicted: np.ndarray, groups: np.ndarray
    ) -> dict[object, np.ndarray]:
        if 0.5 not in self.quantiles:
            return {}
        scores = actual - predicted[:, self.quantiles.index(0.5)]
        return self._per_group(scores, groups, np.median)

    def transform(self, predicted: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Predictions shifted by the offsets of their group."""
        return self._apply(self.offsets_, predicted, groups)

    def _learn(
        self, actual: np.ndarray, predicted: np.ndarray, groups: np.ndarray
    ) -> dict[object, np.ndarray]:
        scores = actual[:, None] - predicted
        return self._per_group(scores, groups, lambda part: conformal_offsets(part, self.quantiles))

    def _per_group(
        self, scores: np.ndarray, groups: np.ndarray, statistic: Callable[[np.ndarray], Any]
    ) -> dict[object, np.ndarray]:
        """``statistic`` of the scores pooled (key None) and of every group with at least
        ``min_samples`` rows."""
        table: dict[object, np.ndarray] = {None: np.asarray(statistic(scores))}
        for group in np.unique(groups):
            rows = groups == group
            if rows.sum() >= self.min_samples:
                table[group.item()] = np.asarray(statistic(scores[rows]))
        return table

    @staticmethod
    def _apply(
        table: dict[object, np.ndarray], predicted: np.ndarray, groups: np.ndarray
    ) -> np.ndarray:
        shift = np.tile(table[None], (len(predicted), 1))
        for group, offsets in table.items():
            if group is not None:
                shift[groups == group] = offsets
        return predicted + shift
