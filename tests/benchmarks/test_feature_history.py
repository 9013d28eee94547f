"""The feature-history benchmark: every feature set reaches the model, and its ratios."""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchmarks.feature_history import (
    DEFAULT_SET,
    FEATURE_SETS,
    dataset_rows,
    parse_args,
    ratios,
    render_markdown,
    summary,
)
from benchmarks.forecast_accuracy import Dataset
from forecaster.features import FeatureConfig
from forecaster.frame import regularize, validate_frame
from forecaster.scenarios import steady_diurnal

STEP = 300


def entry(pinball: float, window: float) -> dict[str, Any]:
    return {"pinball": {"0.9": pinball}, "window_pinball": {"0.9": window}}


def rows(*losses: float) -> dict[str, dict[str, Any]]:
    """One row per feature set, in order, with per-horizon and window losses equal."""
    return {name: entry(loss, loss) for name, loss in zip(FEATURE_SETS, losses, strict=True)}


def test_the_default_set_is_the_served_features_and_every_other_set_differs_from_it() -> None:
    assert FEATURE_SETS[DEFAULT_SET] == FeatureConfig()
    others = [c for name, c in FEATURE_SETS.items() if name != DEFAULT_SET]
    assert all(c != FeatureConfig() for c in others)
    assert len(set(map(repr, others))) == len(others)


def test_every_feature_set_reaches_the_model_on_the_benchmark_folds() -> None:
    frame = regularize(validate_frame(steady_diurnal(days=9, step=STEP, seed=3)), STEP)
    data = Dataset("steady", "synthetic", frame, STEP, "test")
    result = dataset_rows(data, "lightgbm", eval_days=1.0)
    assert set(result) == set(FEATURE_SETS)
    assert all("error" not in row for row in result.values())
    # Same folds, same seed: only the features differ, so the losses must too.
    losses = {row["pinball"]["0.9"] for row in result.values()}
    assert len(losses) == len(FEATURE_SETS)
    assert ratios(result, "pinball")[DEFAULT_SET] == 1.0


def test_ratios_divide_by_the_default_and_mark_a_failed_set() -> None:
    table = rows(2.0, 1.0, 3.0, 2.0, 4.0)
    table["windows to 1d"] = {"error": "ValueError: boom"}
    got = ratios(table, "pinball")
    assert got["lags 0-11"] == 0.5 and got["lags 0-23, windows to 1d"] == 2.0
    assert math.isnan(got["windows to 1d"])
    broken = {**table, DEFAULT_SET: {"error": "ValueError: boom"}}
    assert all(math.isnan(v) for v in ratios(broken, "window_pinball").values())


def test_the_summary_counts_wins_worst_and_geometric_mean_over_traces() -> None:
    datasets = {"a": rows(2.0, 1.0, 2.0, 2.0, 2.0), "b": rows(1.0, 4.0, 1.0, 1.0, 1.0)}
    got = summary(datasets, "pinball")["lags 0-11"]
    assert got == {
        "traces": 2,
        "better": 1,
        "worst": 4.0,
        "best": 0.5,
        "geomean": pytest.approx(2**0.5),
    }
    assert summary(datasets, "pinball")["windows to 1d"]["better"] == 0
    assert set(summary(datasets, "pinball")) == set(FEATURE_SETS) - {DEFAULT_SET}


def test_the_report_shows_each_ratio_and_a_failed_set() -> None:
    table = rows(2.0, 1.0, 3.0, 2.0, 4.0)
    table["windows to 1d"] = {"error": "ValueError: boom"}
    report = {
        "generated": "2026-12-05T00:00:00+00:00",
        "elapsed_seconds": 60.0,
        "settings": {"model": "lightgbm-window", "eval_days": 7.0, "quick": False},
        "datasets": {"trace": table},
    }
    text = render_markdown(report)
    assert "| trace | 2 | 0.500 | failed | 1.000 | 2.000 |" in text
    assert "| lags 0-11 | 1 of 1 | 0.500 | 0.500 | 0.500 |" in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "prophet"], "unknown model 'prophet'"),
        (["--jobs", "0"], "--jobs must be at least 1, got 0"),
    ],
)
def test_bad_arguments_exit_2_naming_them(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(argv)
    assert raised.value.code == 2
    assert says in capsys.readouterr().err
