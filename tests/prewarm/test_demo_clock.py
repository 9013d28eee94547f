"""The demo gives the same numbers whenever it runs: the replay moves by whole weeks only."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from prewarm.demo import DEMO_CONFIG, run_demo

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Days and hours apart, and on different days of the week.
CLOCKS = (
    pd.Timestamp("2031-03-04 09:17:00", tz="UTC"),  # a Tuesday morning
    pd.Timestamp("2031-03-09 02:41:30", tz="UTC"),  # the next Sunday night
)


def fixed(now: pd.Timestamp):
    return lambda: now


def test_demo_training_and_backtest_do_not_depend_on_the_clock(tmp_path):
    runs = []
    for k, now in enumerate(CLOCKS):
        root = tmp_path / str(k)
        summary = run_demo(
            DEMO_CONFIG, root / "report", f"sqlite:///{root / 'mlflow.db'}", clock=fixed(now)
        )
        documents = {
            name: json.loads((root / "report" / name / "backtest.json").read_text())
            for name in summary["workloads"]
        }
        runs.append((summary, documents))
    (first, first_docs), (second, second_docs) = runs
    assert first["training"] == second["training"]
    for name, numbers in first["workloads"].items():
        other = second["workloads"][name]
        spans = ("tuning", "validation")
        assert {k: v for k, v in numbers.items() if k not in spans} == {
            k: v for k, v in other.items() if k not in spans
        }, name
        for span in spans:  # the same windows of the recording, moved by whole weeks
            for edge in ("start", "end"):
                moved = pd.Timestamp(other[span][edge]) - pd.Timestamp(numbers[span][edge])
                assert moved > pd.Timedelta(0) and moved % pd.Timedelta(days=7) == pd.Timedelta(0)
    for name, document in first_docs.items():
        other = second_docs[name]
        assert document["policies"] == other["policies"], name
        assert document["frontier"] == other["frontier"], name
        # The same span of the recording, moved by whole weeks.
        moved = pd.Timestamp(other["evaluation"]["start"]) - pd.Timestamp(
            document["evaluation"]["start"]
        )
        assert moved.total_seconds() % (7 * 86400) == 0 and moved.total_seconds() > 0
        assert document["evaluation"]["hours"] == other["evaluation"]["hours"]
