"""The cold-start sweep: its verdicts, and a short run equal to one backtest per cold start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks.backtest_savings import backtest_settings, loaders, workload
from benchmarks.cold_start_sweep import (
    DOES_NOT_PAY,
    NONE_MEETS,
    PAYS,
    compare,
    main,
    saving_cell,
    where_it_stops,
)
from forecaster.backtest.run import backtest
from forecaster.frame import infer_step
from prewarm.backtest_report import deployed_row

DATA = Path(__file__).resolve().parents[2] / "data"
TRACE = "google_cluster_cpu_5min"
POLICIES = ("static", "reactive", "hybrid", "oracle")


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


@pytest.mark.parametrize(
    ("reactive", "hybrid", "cell"),
    [(True, True, "+20.0%"), (False, True, "reactive misses"), (True, False, "only reactive"),
     (False, False, "neither")],
)  # fmt: skip
def test_saving_cell_says_which_side_meets_the_slo(reactive: bool, hybrid: bool, cell: str) -> None:
    deployed = {"reactive": _row(100.0, reactive), "hybrid": _row(80.0, hybrid)}
    row = {"deployed": deployed, **compare(deployed)}
    assert saving_cell(row, "hybrid") == cell


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 16 days of the Google trace: 14 of training, 2 scored."""
    frame = pd.read_csv(DATA / f"{TRACE}.csv")
    out = tmp_path_factory.mktemp("data")
    frame.iloc[: 16 * 288].to_csv(out / f"{TRACE}.csv", index=False)
    return out


@pytest.mark.slow
def test_each_cold_start_is_the_backtest_it_would_be_alone(data_dir: Path, tmp_path: Path) -> None:
    plot = tmp_path / "sweep.png"
    main(
        [str(data_dir), "--cold-starts", "10m,30s,5m,1m", "--policies", ",".join(POLICIES),
         "--model", "ewma", "--traces", TRACE, "--out", str(tmp_path), "--plot", str(plot),
         "--tuning-margin", "0.5"]
    )  # fmt: skip
    document = json.loads((tmp_path / "cold_start_sweep_subset.json").read_text())
    trace = document["traces"][TRACE]
    assert list(trace["cold_starts"]) == ["30", "60", "300", "600"]
    # 30 s and 1 m read horizons 1..2 of 5-minute data, 5 m horizon 2, 10 m horizon 3
    assert trace["lead_windows"] == 3
    frame = loaders(data_dir)[TRACE]()
    values = frame["value"].to_numpy(dtype=float)
    times = pd.DatetimeIndex(frame["timestamp"])
    for cold_start in (60, 600):
        settings = backtest_settings(workload(values, cold_start), POLICIES, "ewma", 0.5)
        alone = backtest(values, times, infer_step(frame), settings)
        swept = trace["cold_starts"][str(cold_start)]
        assert swept["deployed"] == {p: deployed_row(d) for p, d in alone.deployed.items()}
        assert swept["verdict"] == compare(swept["deployed"])["verdict"]
    lowest = [trace["cold_starts"][c]["lowest_unserved"]["oracle"] for c in trace["cold_starts"]]
    assert np.allclose(lowest, 0.0)
    assert plot.with_stem("sweep-subset").stat().st_size > 0
    report = (tmp_path / "cold_start_sweep_subset.md").read_text()
    assert f"- **{TRACE}**: " in report
    assert "setting that leaves at most 0.5 of the SLO's unserved work there" in report
    assert document["tuning_margin"] == 0.5
