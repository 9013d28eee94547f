"""Progress where stderr is not a terminal: log lines, bounded, instead of a silent bar."""

from __future__ import annotations

import json
import logging

import pytest

from prewarm.options import LoggedProgress, configure_logging, progress_bar


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "prewarm.progress"]


def test_a_task_is_logged_at_its_start_each_tenth_and_its_end(caplog):
    caplog.set_level(logging.INFO, logger="prewarm.progress")
    with LoggedProgress() as bar:
        task = bar.add_task("evaluating ewma", total=1000)
        for done in range(1, 1001):
            bar.update(task, completed=done)
    lines = _lines(caplog)
    assert lines[0] == "evaluating ewma: 0/1000"
    assert lines[-1] == "evaluating ewma: 1000/1000"
    assert len(lines) == 11  # not one per step


def test_a_renamed_task_says_its_new_name_at_once(caplog):
    caplog.set_level(logging.INFO, logger="prewarm.progress")
    with LoggedProgress() as bar:
        task = bar.add_task("backtest", total=None)
        bar.update(task, description="forecasts", completed=3, total=10)
        bar.update(task, completed=4)
        bar.update(task, description="tuning hybrid", completed=0, total=200)
    assert _lines(caplog) == [
        "backtest: started",
        "forecasts: 3/10",
        "forecasts: 4/10",
        "tuning hybrid: 0/200",
    ]


def test_off_a_terminal_the_bar_is_log_lines():
    # pytest captures stderr: not a terminal, as in a CI job or a pipe
    assert isinstance(progress_bar(), LoggedProgress)


@pytest.mark.usefixtures("isolated_logging")
@pytest.mark.parametrize(("level", "shown"), [("WARNING", True), ("ERROR", False)])
def test_off_a_terminal_progress_shows_under_a_quiet_log_level(capsys, level, shown):
    # prewarm demo keeps its logs to WARNING for a quiet terminal, where its bar shows; in a
    # pipe it said nothing for minutes
    configure_logging(level)
    with progress_bar() as bar:
        bar.add_task("demo", total=None)
    records = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [r["message"] for r in records] == (["demo: started"] if shown else [])
