from __future__ import annotations

import pytest

from forecaster.exceptions import NotEnoughHistoryError
from forecaster.splitting import Fold
from training.folds import EvaluationFolds

HOUR = 3600
DAY = 24 * HOUR


@pytest.mark.parametrize(
    ("splitter", "n", "expected"),
    [
        pytest.param(
            # _fold_starts gave (24h, 192h, 216h), (48h, 216h, 240h) after the first cell
            EvaluationFolds(folds=2, window=DAY, train_window=7 * DAY, step=HOUR),
            240,
            [(range(24, 192), range(192, 216)), (range(48, 216), range(216, 240))],
            id="two-daily-folds",
        ),
        pytest.param(
            # _fold_starts gave (0h, 120h, 144h): the fit window clipped to the history
            EvaluationFolds(folds=1, window=DAY, train_window=14 * DAY, step=HOUR),
            144,
            [(range(0, 120), range(120, 144))],
            id="fit-window-clipped",
        ),
        pytest.param(
            # _fold_starts gave (21h, 45h, 46.5h), (22.5h, 46.5h, 48h): same cells selected
            EvaluationFolds(folds=2, window=HOUR * 3 // 2, train_window=DAY, step=HOUR),
            48,
            [(range(21, 45), range(45, 47)), (range(23, 47), range(47, 48))],
            id="window-not-a-whole-number-of-cells",
        ),
    ],
)
def test_split_gives_the_former_folds(
    splitter: EvaluationFolds, n: int, expected: list[Fold]
) -> None:
    assert list(splitter.split(n)) == expected


def test_too_little_history_is_reported() -> None:
    with pytest.raises(NotEnoughHistoryError, match=r"3\.00 days of history cannot hold 1"):
        EvaluationFolds(folds=1, window=DAY, train_window=14 * DAY, step=HOUR).split(72)
