from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from forecaster.scenarios import steady_diurnal
from prewarm.cli import cli


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "demand.csv"
    frame = steady_diurnal(days=6, step=300, seed=0)
    frame[["timestamp", "value"]].to_csv(path, index=False)
    return path


def test_evaluate_prints_a_table_and_writes_the_json(trace, tmp_path):
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            str(trace),
            "--horizon",
            "10m",
            "--eval-days",
            "1",
            "--refit-every",
            "12h",
            "--models",
            "last-value,lightgbm",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "lightgbm" in result.output and "last-value" in result.output
    report = json.loads(out.read_text())
    assert report["horizon_seconds"] == 600
    assert report["evaluation"]["origins"] == 288
    assert report["evaluation"]["start"] < report["evaluation"]["end"]
    assert set(report["models"]) == {"last-value", "lightgbm"}
    for scores in report["models"].values():
        assert set(scores["pinball"]) == {"0.5", "0.9"}
        assert set(scores["relative_pinball"]) == {"0.5", "0.9"}
        assert 0 <= scores["coverage"]["0.9"] <= 1
        assert scores["mae"] > 0 and scores["mase"] > 0 and scores["seconds"] >= 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--models", "prophet"], "unknown model 'prophet'", id="unknown-model"),
        pytest.param(["--horizon", "soon"], "duration such as 30s", id="bad-duration"),
        pytest.param(["--eval-days", "30"], "needs more history", id="too-long"),
    ],
)
def test_bad_input_exits_non_zero_with_one_clear_line(trace, args, message):
    result = CliRunner().invoke(cli, ["evaluate", str(trace), *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_console_script_reports_a_missing_file(tmp_path):
    missing = tmp_path / "nope.csv"
    result = subprocess.run(
        [sys.executable, "-m", "prewarm", "evaluate", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert f"data file '{missing}' does not exist" in result.stderr
    assert "Traceback" not in result.stderr
