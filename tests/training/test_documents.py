"""Reports are strict JSON: a non-finite number is null, never NaN or Infinity."""

from __future__ import annotations

import json

import numpy as np

from training.documents import dumps


def test_non_finite_numbers_become_null_at_any_depth() -> None:
    document = {
        "rmse": float("inf"),
        "folds": [{"mase": np.float32("nan")}, (np.float64(-np.inf),)],
    }
    text = dumps(document)
    assert json.loads(text, parse_constant=lambda name: name) == {
        "rmse": None,
        "folds": [{"mase": None}, [None]],
    }


def test_finite_numbers_and_other_values_are_unchanged() -> None:
    document = {"n": np.int64(3), "x": 1.5, "ok": True, "name": "chat", "none": None}
    assert json.loads(dumps(document)) == {
        "n": 3,
        "x": 1.5,
        "ok": True,
        "name": "chat",
        "none": None,
    }
