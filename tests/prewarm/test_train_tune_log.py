"""What ``prewarm train --tune`` logs and keeps on the run per workload: the setting it
registers, what it bought out of sample against every baseline, and a warning where the tuned
reactive HPA alone was cheaper, since the registered policy is what ``prewarm serve``
publishes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forecaster.backtest.frontier import compared
from prewarm.config_backtest import record_tuning
from prewarm.train import _log_tuned
from training.pipeline import Outcome, TrainResult

pytestmark = pytest.mark.usefixtures("isolated_logging")

SETTINGS = {"quantile": 0.9, "forecast_utilization": 1.0, "target_utilization": 0.9}


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    handler = Records()
    logger = logging.getLogger("prewarm.train")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler.records
    logger.removeHandler(handler)


def document(hybrid: float, reactive: float, settings: dict[str, float]) -> dict[str, Any]:
    """A backtest document's deployed section: hybrid and the reactive HPA meet the SLO, the
    other baselines did not run (no saving against them)."""
    row = {"meets_slo": True, "unserved_fraction": 5e-4}
    savings: dict[str, float | None] = dict.fromkeys([*compared(["hybrid"]), "oracle_gap"])
    return {
        "settings": {"slo_unserved_fraction": 1e-3},
        "deployed": {
            "policies": {
                "hybrid": row | {"cost": hybrid, "settings": settings},
                "reactive": row | {"cost": reactive, "settings": {}},
            },
            "savings": savings | {"vs_reactive": 1 - hybrid / reactive},
        },
    }


def test_a_hybrid_dearer_than_the_reactive_hpa_is_a_warning(
    records: list[logging.LogRecord],
) -> None:
    _log_tuned("chat", SETTINGS, document(1_250.0, 1_000.0, SETTINGS))
    info, warning = records
    assert info.levelno == logging.INFO
    assert "tuned {'quantile': 0.9" in info.getMessage()
    assert "meets the SLO (5.00e-04 unserved)" in info.getMessage()
    assert "-25.0% vs reactive" in info.getMessage()
    assert warning.levelno == logging.WARNING
    assert "costs 25.0% more than the tuned reactive HPA" in warning.getMessage()
    assert warning.workload == "chat"  # type: ignore[attr-defined]


def test_a_saving_is_said_without_a_warning(records: list[logging.LogRecord]) -> None:
    _log_tuned("chat", SETTINGS, document(800.0, 1_000.0, SETTINGS))
    (info,) = records
    assert "+20.0% vs reactive" in info.getMessage()


def test_a_rung_of_reach_is_named(records: list[logging.LogRecord]) -> None:
    rung = SETTINGS | {"target_utilization": 0.15}
    _log_tuned("chat", rung, document(1_000.0, 1_000.0, rung))
    info, headroom = records
    assert "+0.0% vs reactive" in info.getMessage()
    assert "its reactive path at utilization 0.15" in headroom.getMessage()
    assert all(record.levelno == logging.INFO for record in records)


def test_a_hybrid_that_misses_the_slo_out_of_sample_is_a_warning(
    records: list[logging.LogRecord],
) -> None:
    missed = document(800.0, 1_000.0, SETTINGS)
    missed["deployed"]["policies"]["hybrid"] |= {"meets_slo": False, "unserved_fraction": 0.0336}
    _log_tuned("chat", SETTINGS, missed)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert any(
        "the tuned hybrid leaves 3.36% of the work unserved out of sample, 34x the SLO's 0.10%"
        in message
        for message in warnings
    ), warnings
    assert "misses the SLO (3.36e-02 unserved)" in records[0].getMessage()


def test_a_setting_at_the_slos_edge_is_a_warning(records: list[logging.LogRecord]) -> None:
    at_edge = document(800.0, 1_000.0, SETTINGS)
    at_edge["deployed"]["policies"]["reactive"]["unserved_fraction"] = 9.8e-4
    _log_tuned("chat", SETTINGS, at_edge)
    info, edge = records
    assert "+20.0% vs reactive" in info.getMessage()
    assert edge.levelno == logging.WARNING
    assert "under 10% of it to spare: reactive 0.098% (SLO 0.100%)" in edge.getMessage()
    assert "hybrid" not in edge.getMessage().split("(SLO")[0]  # 0.050%: half the SLO spare


def test_a_fleets_verdicts_are_kept_on_the_run_with_a_bounded_tag(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment("tune", str(tmp_path / "artifacts")))
    # 120 workloads where hybrid costs 1,100 against the HPA's 1,000, one where it saves
    # 20%, and one whose reactive HPA missed the SLO (no saving to count)
    documents = {f"w{k:03d}": document(1_100.0, 1_000.0, SETTINGS) for k in range(120)}
    documents["saver"] = document(800.0, 1_000.0, SETTINGS)
    missed = document(900.0, 1_000.0, SETTINGS)
    missed["deployed"]["policies"]["reactive"]["meets_slo"] = False
    missed["deployed"]["savings"]["vs_reactive"] = None
    documents["missed"] = missed
    record_tuning(uri, trained(run.info.run_id, Outcome.REGISTERED), documents)

    kept = client.get_run(run.info.run_id)
    metrics = kept.data.metrics
    assert metrics["tuning.workloads"] == 122
    assert metrics["tuning.meets_slo"] == 122
    assert metrics["tuning.dearer_than_reactive"] == 120
    # 121 comparable workloads: 1 - (120 x 1,100 + 800) / (121 x 1,000)
    assert metrics["tuning.vs_reactive"] == pytest.approx(1 - 132_800 / 121_000)
    tag = kept.data.tags["prewarm.tuning.dearer_than_reactive"]
    assert tag.startswith("w000, w001") and tag.endswith("w099, ...")
    assert "saver" not in tag and "missed" not in tag
    artifact = client.download_artifacts(run.info.run_id, "tuning/deployed.json", str(tmp_path))
    assert len(json.loads(Path(artifact).read_text())) == 122


def test_nothing_is_recorded_when_training_logged_no_new_run(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment("tune", str(tmp_path / "artifacts")))
    # the same data and configuration: the existing version's run is not written to again
    documents = {"chat": document(1_100.0, 1_000.0, SETTINGS)}
    record_tuning(uri, trained(run.info.run_id, Outcome.UNCHANGED), documents)
    kept = client.get_run(run.info.run_id)
    assert "tuning.workloads" not in kept.data.metrics
    assert "prewarm.tuning.dearer_than_reactive" not in kept.data.tags
    assert client.list_artifacts(run.info.run_id) == []


def trained(run_id: str, outcome: Outcome) -> TrainResult:
    """What ``run_training`` returns, as far as the tuning record reads it."""
    return TrainResult(outcome, "tune", "1", run_id, None, None, None, "data", "message")
