"""The savings benchmark's merge of an earlier run (same model, margin and features only, the
later run's traces) and its ``--features``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.backtest_savings import (
    backtest_settings,
    features_arg,
    features_text,
    merged_rows,
    workload,
)
from forecaster.features import FeatureConfig


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


def test_features_reach_the_model_and_name_only_what_they_change() -> None:
    lags = features_arg('{"lags": [0, 1, 2, 3, 4, 5]}')
    assert lags == FeatureConfig(lags=(0, 1, 2, 3, 4, 5))
    spec = workload(np.arange(100.0))
    assert backtest_settings(spec, ("hybrid",), "lightgbm", 0.5, lags).model_params == {
        "features": lags
    }
    assert backtest_settings(spec, ("hybrid",), "lightgbm", 0.5).model_params == {}
    assert features_text(lags) == ' with features `{"lags": [0, 1, 2, 3, 4, 5]}`'
    assert features_text(None) == ""
    assert features_arg('{"lags": [0, 1, 2, 3, 6]}') is None  # the defaults: a default run


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{lags", "Expecting property name"),
        ("[0, 1]", "expected a JSON object of FeatureConfig fields"),
        ('{"lagz": [0]}', "lagz"),
        ('{"lags": [-1]}', "must be whole cells in [0, 5,000,000]"),
    ],
)
def test_bad_features_are_refused_echoing_the_value(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        features_arg(text)
    assert repr(text) in str(refused.value) and says in str(refused.value)


def test_merge_refuses_a_run_with_other_features(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = _run(tmp_path / "served.json", "lightgbm", {"asg": {"seconds": 1.0}})
    lags = FeatureConfig(lags=(0, 1))
    with pytest.raises(SystemExit) as stopped:
        merged_rows(argparse.ArgumentParser(), [served], "lightgbm", 0.5, lags)
    assert stopped.value.code == 2
    assert "a run with features None, this one has {'lags': [0, 1]}" in capsys.readouterr().err
    document = {"model": "lightgbm", "tuning_margin": 0.5, "features": {"lags": [0, 1]}}
    longer = tmp_path / "lags.json"
    longer.write_text(json.dumps({**document, "traces": {"nyc": {"seconds": 2.0}}}))
    assert merged_rows(argparse.ArgumentParser(), [longer], "lightgbm", 0.5, lags) == {
        "nyc": {"seconds": 2.0}
    }
