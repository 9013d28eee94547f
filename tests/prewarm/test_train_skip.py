"""``prewarm train`` (and ``--tune``) with ``training.on_workload_failure: skip`` and one
workload's file missing: the other workload is trained and the skipped one named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.exit_codes import ExitCode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def config_file(tmp_path: Path, policy: str) -> Path:
    frame = gpu_inference_demand(days=5, step=300, seed=3, series="chat", bursts_per_day=0)
    frame[["timestamp", "value"]].to_csv(tmp_path / "chat.csv", index=False)
    document = {
        "source": {
            "type": "file",
            "files": {"chat": str(tmp_path / "chat.csv"), "code": str(tmp_path / "code.csv")},
        },
        "workloads": [
            {"name": name, "capacity": {"capacity_per_replica": 8, "quantile": 0.9}}
            for name in ("chat", "code")
        ],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "1d", "train_window": "2d", "policies": ["predictive"]},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "skip"},
        "training": {"on_workload_failure": policy},
    }
    path = tmp_path / "prewarm.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("tune", [False, True], ids=["train", "tune"])
def test_skip_trains_the_rest(tmp_path: Path, tune: bool) -> None:
    args = ["train", "--config", str(config_file(tmp_path, "skip")), "--no-progress"]
    result = CliRunner().invoke(cli, args + (["--tune"] if tune else []))
    assert result.exit_code in (ExitCode.OK, ExitCode.NOT_PROMOTED), result.output
    assert "; skipped workloads: code (\"workload 'code': data file" in result.output


def test_fail_stops_at_the_missing_file(tmp_path: Path) -> None:
    args = ["train", "--config", str(config_file(tmp_path, "fail")), "--no-progress", "--tune"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == ExitCode.DATA, result.output
    assert "workload 'code': data file" in result.output and "code.csv" in result.output


def test_a_rerun_after_no_promote_says_how_that_version_is_served(tmp_path: Path) -> None:
    # the rerun is idempotent and never promotes: it said only "nothing to do (champion:
    # none)", leaving the operator to find the version that passed nothing
    args = ["train", "--config", str(config_file(tmp_path, "skip")), "--no-progress"]
    first = CliRunner().invoke(cli, [*args, "--no-promote"])
    assert first.exit_code == ExitCode.OK, first.output  # not promoted, as asked
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == ExitCode.OK, again.output
    assert "nothing to do (champion: none)" in again.output
    assert "version 1 is not the champion" in again.output
    assert "setting the 'champion' alias on it" in again.output
