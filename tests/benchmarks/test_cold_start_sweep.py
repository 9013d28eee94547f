"""The cold-start sweep: its verdicts, and a short run equal to one backtest per cold start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchmarks.backtest_savings import backtest_settings, loaders, workload
from benchmarks.cold_start_sweep import main, saving_cell
from forecaster.backtest.run import backtest
from forecaster.frame import infer_step
from prewarm.backtest_report import deployed_row
from prewarm.payoff import compare

DATA = Path(__file__).resolve().parents[2] / "data"
TRACE = "google_cluster_cpu_5min"
POLICIES = ("static", "reactive", "hybrid", "oracle")


def _row(cost: float, meets: bool) -> dict[str, Any]:
    return {"cost": cost, "meets_slo": meets}


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
