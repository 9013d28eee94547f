"""The boosting-parameter benchmark scores the week before the accuracy benchmark's."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from benchmarks.boosting_params import cut, markdown, variants_arg
from benchmarks.forecast_accuracy import Dataset, evaluate_dataset, with_params
from forecaster.scenarios import steady_diurnal


def _dataset(days: int) -> Dataset:
    frame = steady_diurnal(days=days, step=3600, seed=0)
    return Dataset("diurnal", "synthetic", frame, 3600, "forecaster.scenarios.steady_diurnal")


def test_the_scored_span_ends_before_the_days_cut_off() -> None:
    dataset = _dataset(10)
    kept = cut(dataset, 3.0)
    end = dataset.frame["timestamp"].max()
    assert kept.frame["timestamp"].max() == end - pd.Timedelta(days=3)
    assert len(kept.frame) == len(dataset.frame) - 3 * 24
    # scored on the cut data, no origin or target reaches the days cut off
    contenders = {"default": ("prewarm", with_params("last-value"))}
    report = evaluate_dataset(kept, contenders, 2.0)
    assert pd.Timestamp(report["evaluation"]["end"]) <= end - pd.Timedelta(days=3)


def test_cells_are_each_variants_loss_over_the_defaults() -> None:
    def scores(pinball: float, coverage: float) -> dict[str, float]:
        return {
            "pinball": pinball,
            "coverage": coverage,
            "window_pinball": 2 * pinball,
            "window_coverage": coverage,
            "fit_seconds": 1.0,
        }

    results = {
        "a": {"default": scores(2.0, 0.9), "trees400": scores(1.0, 0.88)},
        "b": {"default": scores(4.0, 0.9), "trees400": {"error": "ValueError: boom"}},
        "c": {"default": scores(1.0, 0.9), "trees400": scores(2.0, 0.91)},
    }
    text = markdown(results, 7.0, 60.0)
    # a: 1/2, b: failed and left out of the mean, c: 2/1; the geometric mean of 0.5 and 2
    assert "| trees400 | 0.500 (0.880) | failed: ValueError: boom | 2.000 (0.910) | 1.000 |" in text
    assert "the week before the one `forecast_accuracy` reports" in text


def test_an_unknown_variant_is_a_usage_error_naming_the_known_ones() -> None:
    assert variants_arg("leaves15") == ["default", "leaves15"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown \['trees9'\]; known: default"):
        variants_arg("trees9")
