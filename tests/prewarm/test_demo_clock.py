"""The demo gives the same numbers whenever it runs: the replay moves by whole weeks only."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from prewarm.demo import DEMO_CONFIG, run_demo
from tests.prewarm.conftest import CLOCKS, fixed

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _documents(report: Path) -> tuple[dict, dict]:
    summary = json.loads((report / "summary.json").read_text())
    documents = {
        name: json.loads((report / name / "backtest.json").read_text())
        for name in summary["workloads"]
    }
    return summary, documents


def test_demo_training_and_backtest_do_not_depend_on_the_clock(demo_run, tmp_path):
    """The shared demo run (its replay at ``CLOCKS[0]``) against one at ``CLOCKS[1]``."""
    first_report, _, _ = demo_run
    run_demo(DEMO_CONFIG, tmp_path / "report", f"sqlite:///{tmp_path / 'mlflow.db'}",
             clock=fixed(CLOCKS[1]))  # fmt: skip
    runs = [_documents(first_report), _documents(tmp_path / "report")]
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
