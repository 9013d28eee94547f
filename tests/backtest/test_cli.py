"""``prewarm backtest`` end to end on a small file, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from prewarm.cli import cli


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    n = 9 * 288
    t = np.arange(n)
    values = 100 + 60 * np.sin(2 * np.pi * t / 288) + rng.gamma(2.0, 5.0, n)
    path = tmp_path_factory.mktemp("data") / "demand.csv"
    times = pd.date_range("2026-01-05", periods=n, freq="5min")
    pd.DataFrame({"timestamp": times, "value": values}).to_csv(path, index=False)
    return path


ARGS = ["--model", "ewma", "--train-window", "8d", "--retrain-every", "12h"]


def test_backtest_writes_json_and_report(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    report = tmp_path / "report"
    result = CliRunner().invoke(
        cli,
        ["backtest", str(data_file), *ARGS, "--json", str(out), "--report-dir", str(report)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert set(document) >= {
        "data",
        "evaluation",
        "settings",
        "policies",
        "frontier",
        "cost_at_slo",
        "savings_at_slo",
        "forecast",
    }
    assert document["data"]["rows"] == 9 * 288
    assert document["data"]["step_seconds"] == 300
    assert document["evaluation"]["hours"] == pytest.approx(24.0)
    # --peak-replicas 20: the 99th percentile needs 20 replicas
    p99 = np.quantile(pd.read_csv(data_file)["value"], 0.99)
    assert document["settings"]["capacity_per_replica"] == pytest.approx(p99 / 20)
    assert list(document["policies"]) == [
        "static",
        "reactive",
        "seasonal-naive",
        "predictive",
        "hybrid",
        "oracle",
    ]
    for row in document["policies"].values():
        assert {"knob", "replica_hours", "cost", "unserved_fraction", "meets_slo"} <= set(row)
    assert document["policies"]["oracle"]["unserved_fraction"] == 0.0
    oracle_cost = document["policies"]["oracle"]["cost"]
    assert all(
        p["cost"] >= oracle_cost
        for name, p in document["policies"].items()
        if p["unserved_fraction"] == 0.0
    )
    assert set(document["savings_at_slo"]) == {
        "vs_reactive",
        "vs_static",
        "vs_seasonal_naive",
        "oracle_gap",
    }
    assert document["forecast"]["ewma"]["horizon_seconds"] == 600
    assert json.loads((report / "backtest.json").read_text()) == document
    assert (report / "capacity.png").stat().st_size > 0
    assert (report / "frontier.png").stat().st_size > 0
    assert "![frontier](frontier.png)" in (report / "backtest.md").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "static,magic"], "unknown policy 'magic'"),
        (["--train-window", "30d"], "needs 8640 data steps"),
        (["--cold-start", "5x"], "--cold-start"),
    ],
    ids=["unknown-policy", "short-history", "bad-duration"],
)
def test_bad_input_exits_with_one_line(data_file: Path, extra: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["backtest", str(data_file), "--model", "ewma", *extra])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreadable_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["backtest", str(tmp_path / "missing.csv")])
    assert result.exit_code != 0
    assert "does not exist" in result.output
