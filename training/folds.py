"""Training's evaluation folds: the most recent windows, each fitted on the history before it.

::

    history ..........................................................| now
    fold 1   fit on |---- train_window ----|== window ==|
    fold 2                  fit on |---- train_window ----|== window ==|   (the gate's)

The last fold ends at the end of the history; each fold is fitted on up to ``train_window``
of data before it, and scored on its window.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from forecaster.exceptions import NotEnoughHistoryError
from forecaster.splitting import Fold

DAY = 86400


@dataclass(frozen=True)
class EvaluationFolds:
    """The ``folds`` most recent windows of ``window`` seconds on a grid of ``step`` seconds.

    Durations are seconds, as configured; a fold's bounds fall on the first cell at or after
    them when a duration is not a whole number of cells.
    """

    folds: int
    window: int
    train_window: int
    step: int

    def split(self, n: int) -> Iterator[Fold]:
        """(fit cells, scored cells) of each fold on a grid of ``n`` cells, oldest first.

        Raises
        ------
        NotEnoughHistoryError
            When the oldest fold has less than a day (or four windows), or less than
            ``train_window`` when that is shorter, to be fitted on.
        """
        history = n * self.step
        fitted = min(history - self.folds * self.window, self.train_window)
        if fitted < min(max(DAY, 4 * self.window), self.train_window):
            raise NotEnoughHistoryError(
                f"{history / DAY:.2f} days of history cannot hold {self.folds} evaluation "
                f"fold(s) of {pd.Timedelta(seconds=self.window)} after enough training data; "
                "pull more history (source.lookback) or shorten evaluation.window/folds"
            )
        return self._folds(n)

    def _folds(self, n: int) -> Iterator[Fold]:
        for k in range(self.folds, 0, -1):
            start = self._cell(n, k * self.window)
            fit = max(0, self._cell(n, k * self.window + self.train_window))
            yield range(fit, start), range(start, self._cell(n, (k - 1) * self.window))

    def _cell(self, n: int, before_end: int) -> int:
        """The first cell at or after ``before_end`` seconds before the end of the grid."""
        return n - before_end // self.step
