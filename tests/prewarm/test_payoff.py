"""Where prediction pays: the verdict per cold start, the crossover, and the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.frame import infer_step, regularize
from forecaster.workload import WorkloadSpec
from prewarm.payoff import (
    DOES_NOT_PAY,
    NONE_MEETS,
    PAYS,
    cold_start_row,
    compare,
    sweep,
    where_it_stops,
)
from training.sources.file import read_series

DATA = Path(__file__).resolve().parents[2] / "data"


def _row(cost: float, meets: bool) -> dict[str, Any]:
    return {"cost": cost, "meets_slo": meets}


def test_the_cheapest_predictive_policy_meeting_the_slo_is_compared() -> None:
    result = compare(
        {
            "reactive": _row(100.0, True),
            "hybrid": _row(90.0, True),
            "crane-dsp": _row(80.0, True),
            "predictive": _row(50.0, False),  # cheaper, but misses the SLO
            "oracle": _row(70.0, True),  # the bound, never the contender
        }
    )
    assert result["best_predictive"] == "crane-dsp"
    assert result["saving"] == pytest.approx(0.2)
    assert result["hybrid_saving"] == pytest.approx(0.1)
    assert result["verdict"] == PAYS


@pytest.mark.parametrize(
    ("deployed", "verdict", "saving"),
    [
        ({"reactive": _row(100.0, True), "hybrid": _row(101.0, True)}, DOES_NOT_PAY, -0.01),
        ({"reactive": _row(100.0, True), "hybrid": _row(90.0, False)}, DOES_NOT_PAY, None),
        ({"reactive": _row(100.0, False), "hybrid": _row(150.0, True)}, PAYS, None),
        ({"reactive": _row(100.0, False), "hybrid": _row(90.0, False)}, NONE_MEETS, None),
    ],
    ids=["dearer", "only-reactive-meets", "only-prediction-meets", "none-meets"],
)
def test_verdict(deployed: dict[str, Any], verdict: str, saving: float | None) -> None:
    result = compare(deployed)
    assert result["verdict"] == verdict
    assert result["saving"] == (saving if saving is None else pytest.approx(saving))


def test_where_it_stops_names_the_crossover() -> None:
    verdicts = {5: DOES_NOT_PAY, 60: DOES_NOT_PAY, 300: PAYS, 600: PAYS}
    assert where_it_stops(verdicts) == "pays from a 5m cold start up; does not pay at 1m and below"
    # where neither side meets the SLO says nothing about the crossover, below it...
    assert where_it_stops(verdicts | {120: NONE_MEETS}) == (
        f"pays from a 5m cold start up; does not pay at 1m and below; {NONE_MEETS} at 2m"
    )
    # ...but above it "from 5m up" would claim 15m too: the paying ones are named instead
    verdicts |= {120: NONE_MEETS, 900: NONE_MEETS}
    assert where_it_stops(verdicts) == (
        f"pays at 5m, 10m; does not pay at 1m and below; {NONE_MEETS} at 2m, 15m"
    )
    mixed = {5: PAYS, 60: DOES_NOT_PAY, 300: NONE_MEETS}
    assert where_it_stops(mixed) == f"pays at 5s; does not pay at 1m; {NONE_MEETS} at 5m"
    assert where_it_stops({5: DOES_NOT_PAY, 60: NONE_MEETS}).startswith("does not pay at any")
    assert where_it_stops({5: PAYS, 60: NONE_MEETS}).startswith("pays at every cold start")


def test_the_sweep_is_one_backtest_per_cold_start_sharing_forecasts() -> None:
    frame = read_series(DATA / "google_cluster_cpu_5min.csv")
    frame = regularize(frame.iloc[: 16 * 288], 300)
    values = frame["value"].to_numpy(dtype=float)
    times = pd.DatetimeIndex(frame["timestamp"])
    spec = WorkloadSpec(capacity_per_replica=float(pd.Series(values).quantile(0.99)) / 20)
    settings = BacktestSettings(
        spec, ("reactive", "hybrid", "oracle"), train_window=14 * 86400, model="ewma"
    )
    rows = sweep(values, times, infer_step(frame), settings, [600, 60])
    assert list(rows) == [600, 60]
    for cold_start, row in rows.items():
        at = BacktestSettings(
            WorkloadSpec(capacity_per_replica=spec.capacity_per_replica, cold_start=cold_start),
            settings.policies,
            train_window=settings.train_window,
            model="ewma",
        )
        alone = cold_start_row(backtest(values, times, 300, at))
        assert row == alone
        assert row["verdict"] in (PAYS, DOES_NOT_PAY, NONE_MEETS)
