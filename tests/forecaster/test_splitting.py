"""Every splitter answers ``split(n)`` with the windows its former method gave."""

from __future__ import annotations

import pytest

from forecaster.backtest.walkforward import WalkForward
from forecaster.evaluation import RollingOrigin
from forecaster.splitting import Fold, Splitter, origins


@pytest.mark.parametrize(
    ("splitter", "n", "expected"),
    [
        pytest.param(
            # blocks() gave the origins of cells 11-13, 14-16 and 17
            RollingOrigin(horizon=2, eval_cells=7, refit_every=3),
            20,
            [
                (range(0, 12), range(12, 15)),
                (range(0, 15), range(15, 18)),
                (range(0, 18), range(18, 19)),
            ],
            id="rolling-origin-three-blocks",
        ),
        pytest.param(
            # blocks() gave one block, the origins of cells 5-8
            RollingOrigin(horizon=1, eval_cells=4, refit_every=4),
            10,
            [(range(0, 6), range(6, 10))],
            id="rolling-origin-one-block",
        ),
        pytest.param(
            # periods(20) gave (10, 14), (14, 18), (18, 20)
            WalkForward(train_window=10, retrain_every=4),
            20,
            [
                (range(0, 10), range(10, 14)),
                (range(4, 14), range(14, 18)),
                (range(8, 18), range(18, 20)),
            ],
            id="walk-forward-short-last-period",
        ),
        pytest.param(
            # periods(7) gave (3, 5), (5, 7)
            WalkForward(train_window=3, retrain_every=2),
            7,
            [(range(0, 3), range(3, 5)), (range(2, 5), range(5, 7))],
            id="walk-forward-even-periods",
        ),
    ],
)
def test_split_gives_the_former_windows(splitter: Splitter, n: int, expected: list[Fold]) -> None:
    assert list(splitter.split(n)) == expected


def test_origins_are_one_cell_before_the_cells_they_serve() -> None:
    assert origins(range(12, 15)) == range(11, 14)
