"""How much of a trace is scored, and how the backtest's training window is fitted to it."""

from __future__ import annotations

import pytest

from forecaster.exceptions import NotEnoughHistoryError
from prewarm.backtest import fit_train_window
from prewarm.spans import duration_text, scored_span

DAY, HOUR, STEP = 86400, 3600, 300


@pytest.mark.parametrize(
    ("total", "preferred", "expected"),
    [
        pytest.param(30 * DAY, 3 * DAY, 3 * DAY, id="long-data-scores-the-preference"),
        pytest.param(6 * DAY, 3 * DAY, 3 * DAY, id="exactly-twice"),
        pytest.param(5 * DAY, 3 * DAY, 2 * DAY, id="history-keeps-3-days"),
        pytest.param(3 * DAY, 3 * DAY, 0.6 * DAY, id="short-data-scores-its-last-20pc"),
        pytest.param(HOUR, 3 * DAY, 0.2 * HOUR, id="an-hour"),
    ],
)
def test_scored_span(total: float, preferred: float, expected: float) -> None:
    assert scored_span(total, preferred) == pytest.approx(expected)


def test_scored_span_never_shrinks_as_the_data_grows() -> None:
    spans = [scored_span(hours * HOUR, 3 * DAY) for hours in range(1, 24 * 10)]
    assert spans == sorted(spans)


@pytest.mark.parametrize(
    ("days", "train", "min_eval", "window", "note"),
    [
        pytest.param(30, 14 * DAY, None, 14 * DAY, None, id="fits"),
        pytest.param(14, 14 * DAY, None, 11 * DAY, "from 14d to 11d", id="default-shortened"),
        pytest.param(14, 14 * DAY, DAY, 13 * DAY, "from 14d to 13d", id="explicit-min-eval"),
        pytest.param(4, 2 * DAY, None, 2 * DAY, None, id="short-window-short-data"),
    ],
)
def test_fit_train_window(
    days: int, train: int, min_eval: int | None, window: int, note: str | None
) -> None:
    fitted, notes = fit_train_window(days * DAY // STEP, STEP, train, min_eval)
    assert fitted == window
    assert (notes == []) if note is None else (note in notes[0])


def test_fit_train_window_refuses_when_nothing_is_left_to_train_on() -> None:
    with pytest.raises(NotEnoughHistoryError, match="lower --min-eval"):
        fit_train_window(14 * DAY // STEP, STEP, 14 * DAY, 14 * DAY)


def test_duration_text() -> None:
    assert [duration_text(s) for s in (0, 10, 2840, 11 * DAY, DAY + 300)] == [
        "0s",
        "10s",
        "47m 20s",
        "11d",
        "1d 5m",
    ]
