"""``prewarm train --tune --tune-limit``: a run backtests at most that many workloads, the
others keep the champion's tuned settings, and the ones no backtest has scored are tuned
first on the next run (a real MLflow store, two nightly runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.exit_codes import ExitCode
from training.tracking import POLICIES_ARTIFACT, TUNING_DEPLOYED, TUNING_PENDING

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
WORKLOADS = ("chat", "code")


def write_history(tmp_path: Path, days: int) -> None:
    for seed, name in enumerate(WORKLOADS):
        frame = gpu_inference_demand(days=days, step=300, seed=seed, series=name, bursts_per_day=0)
        frame[["timestamp", "value"]].to_csv(tmp_path / f"{name}.csv", index=False)


def config_file(tmp_path: Path) -> Path:
    document = {
        "source": {"type": "file", "files": {n: str(tmp_path / f"{n}.csv") for n in WORKLOADS}},
        "workloads": [
            {"name": name, "capacity": {"capacity_per_replica": 8, "quantile": 0.9}}
            for name in WORKLOADS
        ],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "1d", "train_window": "2d", "policies": ["predictive"]},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "experiment": "limit"},
    }
    path = tmp_path / "prewarm.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def version_artifacts(tmp_path: Path, version: str) -> dict[str, Any]:
    """The registered policies' settings, the tuned and the pending workloads of a version."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (model,) = client.search_registered_models()
    run_id = client.get_model_version(model.name, version).run_id
    assert run_id is not None

    def read(path: str) -> Any:
        folder = tmp_path / f"v{version}"
        return json.loads(Path(client.download_artifacts(run_id, path, str(folder))).read_text())

    return {
        "settings": {
            name: {k: policy[k] for k in ("quantile", "forecast_utilization", "tolerance")}
            for name, policy in read(POLICIES_ARTIFACT).items()
        },
        "tuned": sorted(read(TUNING_DEPLOYED)),
        "pending": read(TUNING_PENDING)["workloads"],
        "counts": {
            key: value
            for key, value in client.get_run(run_id).data.metrics.items()
            if key in ("tuning.workloads", "tuning.kept", "tuning.pending")
        },
    }


def test_one_workload_a_night_tunes_the_untuned_one_first_the_next_night(tmp_path: Path) -> None:
    config = config_file(tmp_path)
    args = ["train", "--config", str(config), "--no-progress", "--tune", "--tune-limit", "1"]
    write_history(tmp_path, days=5)
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == ExitCode.OK, first.output
    v1 = version_artifacts(tmp_path, "1")
    (tuned,) = v1["tuned"]
    (untuned,) = set(WORKLOADS) - {tuned}
    assert v1["pending"] == [untuned]
    assert v1["counts"] == {"tuning.workloads": 1, "tuning.kept": 1, "tuning.pending": 1}
    # the new workload past the limit is registered with the config's own settings (it
    # leaves them to the spec), the tuned one with the backtest's
    assert v1["settings"][untuned] == {
        "quantile": None,
        "forecast_utilization": None,
        "tolerance": 0.1,
    }
    assert v1["settings"][tuned]["quantile"] is not None
    assert f"workloads {[untuned]!r}, past --tune-limit 1 this run, are new" in first.output

    write_history(tmp_path, days=6)  # the next night: one more day of data
    second = CliRunner().invoke(cli, args)
    assert second.exit_code in (ExitCode.OK, ExitCode.NOT_PROMOTED), second.output
    v2 = version_artifacts(tmp_path, "2")
    assert v2["tuned"] == [untuned] and v2["pending"] == []
    assert v2["counts"] == {"tuning.workloads": 1, "tuning.kept": 1, "tuning.pending": 0}
    # the workload tuned the night before keeps that night's tuned settings
    assert v2["settings"][tuned] == v1["settings"][tuned]


def test_a_limit_without_tune_is_refused(tmp_path: Path) -> None:
    args = ["train", "--config", str(config_file(tmp_path)), "--tune-limit", "1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "--tune-limit bounds the backtests of --tune: give --tune too" in result.output
