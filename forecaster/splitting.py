"""The splitter protocol: every walk-forward in the project cuts a grid the same way.

Evaluation (:class:`forecaster.evaluation.RollingOrigin`), the backtest's retraining
(:class:`forecaster.backtest.walkforward.WalkForward`) and training's evaluation folds each
keep their own parameters, and all answer ``split(n)`` like scikit-learn's splitters: the
(train cells, test cells) of each fold on a regular grid of ``n`` cells, oldest first.

Where a fold forecasts, test cell ``c`` is served by the forecast made at origin ``c - 1``,
the last cell known when ``c`` starts (:func:`origins`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

Fold = tuple[range, range]


class Splitter(Protocol):
    """Anything that cuts a grid of ``n`` cells into (train, test) folds."""

    def split(self, n: int) -> Iterator[Fold]:
        """(train cells, test cells) of each fold, oldest first; raises when ``n`` is short."""
        ...


def origins(test: range) -> range:
    """The forecast origins serving the cells of ``test``: each one cell before its cell."""
    return range(test.start - 1, test.stop - 1)
