"""What ``prewarm train`` writes to stderr: clean logs, never run into the progress bar.

Each run trains on data of its own (another seed), so every run fits, logs and registers a
model in the module's store and meets MLflow's usual warnings on the way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("isolated_logging")]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = "━"  # rich's bar glyph
WARNING_TEXT = re.compile(r"Warning|CloudPickle|Hint:")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("train-output")


def train(store: Path, seed: int, *args: str, env: dict[str, str] | None = None) -> Result:
    data = store / f"demand-{seed}.csv"
    gpu_inference_demand(days=3, step=300, seed=seed, series="chat", bursts_per_day=0).to_csv(
        data, index=False
    )
    config: dict[str, Any] = {
        "source": {"type": "file", "path": str(data)},
        "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 8, "cold_start": "10m",
                                                    "max_replicas": 100, "quantile": 0.9}}],
        "model": {"name": "lightgbm", "params": {"n_estimators": 10}},
        "evaluation": {"window": "6h", "train_window": "2d", "policies": ["predictive"]},
        "mlflow": {"tracking_uri": f"sqlite:///{store / 'mlflow.db'}", "experiment": "output",
                   "registered_model": "output"},
    }  # fmt: skip
    path = store / f"train-{seed}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner(env=env).invoke(cli, ["train", "--config", str(path), *args])
    assert result.exit_code in (0, 4), result.output
    return result


def visible_lines(stream: str) -> list[str]:
    """What a terminal shows of each line: the text after its last carriage return (rich
    redraws its bar in place after one), without escape codes."""
    return [ANSI.sub("", line).rsplit("\r", 1)[-1] for line in stream.split("\n")]


def json_records(stream: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.splitlines() if line.startswith("{")]


def test_on_a_terminal_logs_print_above_the_bar_without_warnings(store: Path) -> None:
    # TTY_COMPATIBLE=1 makes rich treat the captured stderr as a terminal: the bar is drawn.
    result = train(store, 1, env={"TTY_COMPATIBLE": "1", "COLUMNS": "120"})
    assert BAR in result.stderr
    lines = visible_lines(result.stderr)
    logged = [line for line in lines if "INFO" in line]
    assert any("stage fit and score fold 1/1" in line for line in logged)
    assert [line for line in logged if BAR in line] == []
    assert '{"time"' not in result.stderr
    assert WARNING_TEXT.findall(result.stderr) == []


def test_piped_logs_are_whole_json_lines_without_warnings(store: Path) -> None:
    result = train(store, 2)
    # Nothing but JSON records: MLflow's own lines ("Successfully registered model ...") too
    # would break a collector that parses each line.
    assert [line for line in result.stderr.splitlines() if not line.startswith("{")] == []
    records = json_records(result.stderr)
    assert "stage fit and score fold 1/1" in [r["message"] for r in records]
    assert {r["logger"].split(".")[0] for r in records} <= {"prewarm", "training"}
    assert WARNING_TEXT.findall(result.stderr) == []


def test_debug_shows_the_libraries_warnings(store: Path) -> None:
    result = train(store, 3, "--log-level", "DEBUG", "--no-progress")
    from_mlflow = [r for r in json_records(result.stderr) if r["logger"].startswith("mlflow")]
    assert any("CloudPickle" in r["message"] and r["level"] == "warning" for r in from_mlflow)


def train_missing_file(store: Path, env: dict[str, str] | None = None) -> Result:
    config = {
        "source": {"type": "file", "files": {"chat": str(store / "nowhere.csv")}},
        "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 8}}],
        "mlflow": {"tracking_uri": f"sqlite:///{store / 'mlflow.db'}", "experiment": "output"},
    }
    path = store / "missing.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner(env=env).invoke(cli, ["train", "--config", str(path)])
    assert result.exit_code == 3, result.output
    return result


def test_on_a_terminal_a_failure_is_said_once_by_its_error_line(
    store: Path,
) -> None:
    result = train_missing_file(store, env={"TTY_COMPATIBLE": "1", "COLUMNS": "200"})
    lines = visible_lines(result.stderr)
    assert [line for line in lines if "ERROR" in line] == []
    assert len([line for line in lines if "nowhere.csv" in line]) == 1  # said once, not twice
    assert [line for line in lines if line.startswith("Error: data-source failure")] == [
        "Error: data-source failure: no file of the source could be read: workload 'chat': "
        f"data file "
        f"'{store / 'nowhere.csv'}' does not exist or is not a file"
    ]


def test_piped_a_failure_is_a_json_record_for_the_collector_and_progress_is_logged(
    store: Path,
) -> None:
    result = train_missing_file(store)
    records = json_records(result.stderr)
    errors = [r["message"] for r in records if r["level"] == "error"]
    assert len(errors) == 1 and "workload 'chat': data file" in errors[0]
    assert len([r for r in records if "nowhere.csv" in r["message"]]) == 1
    assert "pull history: 0/6" in [
        r["message"] for r in records if r["logger"] == "prewarm.progress"
    ]
