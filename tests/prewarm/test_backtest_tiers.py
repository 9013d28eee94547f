"""``prewarm backtest --config`` groups the workloads by tier, each held to its tier's SLO
latency unless the config gives one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from prewarm.cli import cli

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[2] / "data"
TRACE = str(DATA / "google_cluster_cpu_5min.csv")


def test_workloads_are_grouped_by_tier_with_its_slo_latency(tmp_path: Path) -> None:
    capacity = {"capacity_per_replica": 0.03, "cold_start": "5m", "max_replicas": 40}
    document = {
        "source": {"type": "file", "lookback": "10d",
                   "files": {"nightly": TRACE, "chat": TRACE, "reports": TRACE}},
        "workloads": [
            # in the config's order a batch workload comes first; the report puts tier 1 first
            {"name": "nightly", "capacity": {**capacity, "tier": 3}},
            {"name": "chat", "capacity": {**capacity, "tier": 1}},
            {"name": "reports", "capacity": {**capacity, "tier": 3, "slo_latency": "1m"}},
        ],
        "model": {"name": "ewma"},
        "evaluation": {"window": "1d", "train_window": "7d"},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }  # fmt: skip
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    result = CliRunner().invoke(
        cli,
        ["backtest", "--config", str(path), "--json", str(tmp_path / "out.json"),
         "--report-dir", str(tmp_path / "report")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    documents = json.loads((tmp_path / "out.json").read_text())
    settings = {name: documents[name]["settings"] for name in ("nightly", "chat", "reports")}
    assert {n: (s["tier"], s["slo_latency_seconds"]) for n, s in settings.items()} == {
        "nightly": (3, 300), "chat": (1, 30), "reports": (3, 60)
    }  # fmt: skip
    output = result.output
    tier_1, tier_3 = output.index("Tier 1 (latency critical)"), output.index("Tier 3 (batch)")
    assert tier_1 < output.index("chat (tier 1)") < tier_3
    assert tier_3 < output.index("nightly (tier 3)") < output.index("reports (tier 3)")
    tiers = (tmp_path / "report" / "tiers.md").read_text()
    assert tiers.index("Tier 1 (latency critical)") < tiers.index("Tier 3 (batch)")
    # each row shows the SLO latency its workload was held to
    rows = {line.split("|")[1].strip(): line for line in tiers.splitlines() if line.count("|") > 3}
    assert "| 30s |" in rows["chat"]
    assert "| 5m |" in rows["nightly"]
    assert "| 1m |" in rows["reports"]
    # each workload's report names what was replayed: the workload, from the config
    report = (tmp_path / "report" / "chat" / "backtest.md").read_text()
    assert f"Data of workload `chat` from the config `{path}`: " in report
