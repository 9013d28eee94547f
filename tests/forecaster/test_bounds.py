"""Sizes and values derived from the data are bounded before anything is allocated by them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest.simulator import simulate
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.frame import MAX_GRID_CELLS, regularize, validate_frame
from forecaster.workload import MAX_REPLICAS, WorkloadSpec


def frame(values: list[float], covariate: list[float] | None = None) -> pd.DataFrame:
    times = pd.date_range("2026-01-01", periods=len(values), freq="1min", tz="UTC")
    data = {"series": "chat", "timestamp": times, "value": values}
    if covariate is not None:
        data["gpu"] = covariate
    return pd.DataFrame(data)


@pytest.mark.parametrize(
    ("values", "covariate", "match"),
    [
        pytest.param(
            [1.0, 2.0, 1e15],
            None,
            r"column 'value' has 1 value\(s\) beyond the sane range \(finite, below 1e\+12 in "
            r"magnitude\); first at row 2 \(series 'chat', 2026-01-01T00:02:00\+00:00\): "
            r"1e\+15",
            id="outlier",
        ),
        pytest.param([1e308, 1.0, 1e308], None, r"2 value\(s\) .* row 0 .*: 1e\+308", id="max"),
        pytest.param([1.0, 1.0], [1.0, -1e13], r"column 'gpu' .* row 1 .*: -1e\+13", id="cov"),
        pytest.param([1.0, 1.0], [1.0, np.inf], r"column 'gpu' .* row 1 .*: inf", id="cov-inf"),
    ],
)
def test_values_beyond_the_sane_range_are_refused_with_row_and_value(
    values: list[float], covariate: list[float] | None, match: str
) -> None:
    covariates = ["gpu"] if covariate is not None else []
    with pytest.raises(DataValidationError, match=match):
        validate_frame(frame(values, covariate), covariates=covariates)


def test_the_bound_is_a_parameter_and_values_below_it_pass() -> None:
    assert validate_frame(frame([1.0, 9.9e11]))["value"].max() == 9.9e11
    with pytest.raises(DataValidationError, match="below 100 in magnitude"):
        validate_frame(frame([1.0, 100.0]), max_value=100)


def test_a_stray_timestamp_cannot_blow_up_the_grid() -> None:
    times = pd.to_datetime(["2026-01-01T00:00", "2026-01-01T00:01", "2126-01-01T00:00"], utc=True)
    stray = pd.DataFrame({"series": "chat", "timestamp": times, "value": [1.0, 1.0, 1.0]})
    with pytest.raises(DataValidationError, match=rf"more than the limit of {MAX_GRID_CELLS:,}"):
        regularize(validate_frame(stray), 60)


def test_max_replicas_has_an_upper_bound() -> None:
    with pytest.raises(ConfigError, match=r"<= 100,000, got 1000000000000000000000000000000"):
        WorkloadSpec(capacity_per_replica=1.0, max_replicas=10**30)
    assert WorkloadSpec(capacity_per_replica=1.0, max_replicas=MAX_REPLICAS).max_replicas == (
        MAX_REPLICAS
    )


@pytest.mark.parametrize(
    ("desired", "match"),
    [
        pytest.param(
            [1, 10**12, 1], r"\[0, 100,000\]; step 1 of 3 asks for 1000000000000", id="huge"
        ),
        pytest.param([1, 2, 1.5], r"step 2 of 3 asks for 1.5", id="fraction"),
        pytest.param([1, np.nan, 1], r"step 1 of 3 asks for nan", id="nan"),
    ],
)
def test_the_simulator_refuses_replica_counts_it_cannot_hold(
    desired: list[float], match: str
) -> None:
    spec = WorkloadSpec(capacity_per_replica=1.0)
    with pytest.raises(DataValidationError, match=match):
        simulate(np.ones(3), np.asarray(desired), spec, step_seconds=15)
