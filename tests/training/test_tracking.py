"""MLflow plumbing that needs no store: run names and the pyfunc's signature."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
from mlflow.types import DataType

from training.tracking import plan_signature, run_name


def test_run_name_is_the_time_the_run_started_in_utc() -> None:
    started = datetime(2030, 1, 2, 5, 4, tzinfo=timezone(timedelta(hours=2)))
    assert run_name(started) == "train 2030-01-02 03:04 UTC"
    assert run_name(pd.Timestamp("2030-01-02 03:04", tz=UTC)) == "train 2030-01-02 03:04 UTC"


def test_plan_signature_declares_integer_outputs_without_mlflow_warning() -> None:
    example = pd.DataFrame(
        {
            "series": ["chat", "chat"],
            "timestamp": pd.to_datetime(["2024-05-01 00:00", "2024-05-01 00:05"]),
            "value": [1.0, 2.0],
        }
    )
    output = pd.DataFrame({"series": ["chat"], "desired_replicas": [3], "q0.9": [2.5]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        signature = plan_signature(example, output)
    assert [str(w.message) for w in caught if "integer" in str(w.message)] == []
    assert signature.outputs is not None
    types = {c.name: c.type for c in signature.outputs.inputs}
    assert types == {
        "series": DataType.string,
        "desired_replicas": DataType.long,
        "q0.9": DataType.double,
    }
    assert [c.name for c in signature.inputs.inputs] == ["series", "timestamp", "value"]
