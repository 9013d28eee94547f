"""The one check of a capacity plan (``forecaster.capacity.check_plan``), table-driven."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from forecaster.capacity import PLAN_COLUMNS, check_plan, check_plan_row
from forecaster.exceptions import PlanError
from forecaster.workload import WorkloadPolicy, WorkloadSpec

POLICIES = {
    "chat": WorkloadPolicy(WorkloadSpec(capacity_per_replica=10.0, min_replicas=1, max_replicas=8))
}


CHAT = ["chat"]


def plan(**changes: Any) -> pd.DataFrame:
    row = {
        "series": "chat",
        "origin": pd.Timestamp("2026-01-01", tz="UTC"),
        "forecast_demand": 35.0,
        "desired_replicas": 4,
        "quantile": 0.9,
        "lead_time_seconds": 300.0,
    } | changes
    return pd.DataFrame([row])


def test_a_good_plan_passes() -> None:
    check_plan(plan(), ["chat"], POLICIES)
    assert list(plan().columns) == list(PLAN_COLUMNS)


@pytest.mark.parametrize(
    ("frame", "expected", "match"),
    [
        pytest.param(plan().drop(columns="quantile"), CHAT, r"lacks column.*quantile", id="column"),
        pytest.param(plan(), [*CHAT, "code"], r"missing \['code'\]", id="missing-workload"),
        pytest.param(plan(), [], r"unexpected \['chat'\]", id="extra-workload"),
        pytest.param(pd.concat([plan(), plan()]), CHAT, r"expected one row", id="twice"),
        pytest.param(plan(forecast_demand=math.nan), CHAT, r"`forecast_demand` = nan", id="nan"),
        pytest.param(plan(desired_replicas=-1), CHAT, r"`desired_replicas` = -1", id="negative"),
        pytest.param(plan(lead_time_seconds=math.inf), CHAT, r"`lead_time_seconds`", id="inf"),
        pytest.param(plan(forecast_demand="x"), CHAT, r"`forecast_demand` = nan", id="text"),
        pytest.param(plan(desired_replicas=9), CHAT, r"= 9.*outside \[1, 8\]", id="bounds"),
    ],
)  # fmt: skip
def test_a_bad_plan_is_refused_naming_what(
    frame: pd.DataFrame, expected: list[str], match: str
) -> None:
    with pytest.raises(PlanError, match=match):
        check_plan(frame, expected, POLICIES)


def test_bounds_are_checked_only_with_policies() -> None:
    check_plan(plan(desired_replicas=9), ["chat"])
    with pytest.raises(
        PlanError, match=r"workload 'chat' `desired_replicas` = 0, outside \[1, 8\]"
    ):
        check_plan_row("chat", 1.0, 0, 60.0, bounds=(1, 8))
