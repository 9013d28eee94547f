"""The savings benchmark's merge of an earlier run: same model only, the later run's traces."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.backtest_savings import merged_rows


def _run(path: Path, model: str, traces: dict[str, dict[str, float]]) -> Path:
    path.write_text(json.dumps({"model": model, "tuning_margin": 0.5, "traces": traces}))
    return path


def test_merge_takes_the_traces_of_earlier_runs_of_the_same_model(tmp_path: Path) -> None:
    first = _run(tmp_path / "a.json", "lightgbm-window", {"asg": {"seconds": 1.0}})
    second = _run(tmp_path / "b.json", "lightgbm-window", {"nyc": {"seconds": 2.0}})
    rows = merged_rows(argparse.ArgumentParser(), [first, second], "lightgbm-window", 0.5)
    assert rows == {"asg": {"seconds": 1.0}, "nyc": {"seconds": 2.0}}
    assert merged_rows(argparse.ArgumentParser(), [], "lightgbm") == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (json.dumps({"model": "lightgbm", "traces": {}}), "a run of model 'lightgbm'"),
        ("[1, 2]", "a run of model None"),
        ("{not json", "Expecting property name"),
    ],
)
def test_merge_refuses_another_models_run_or_a_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "earlier.json"
    path.write_text(content)
    with pytest.raises(SystemExit) as stopped:
        merged_rows(argparse.ArgumentParser(), [path], "lightgbm-window")
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"--merge {path}" in error and message in error


def test_merge_refuses_a_run_tuned_by_another_margin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"model": "lightgbm", "traces": {"asg": {"seconds": 1.0}}}))
    # a document written before the margin was recorded was tuned by the plain rule
    assert merged_rows(argparse.ArgumentParser(), [plain], "lightgbm", 1.0) == {
        "asg": {"seconds": 1.0}
    }
    with pytest.raises(SystemExit) as stopped:
        merged_rows(argparse.ArgumentParser(), [plain], "lightgbm", 0.5)
    assert stopped.value.code == 2
    assert "a run of tuning margin 1.0, this one is 0.5" in capsys.readouterr().err
