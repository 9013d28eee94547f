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
    records = json_records(result.stderr)
    assert "stage fit and score fold 1/1" in [r["message"] for r in records]
    assert {r["logger"].split(".")[0] for r in records} <= {"prewarm", "training"}
    assert WARNING_TEXT.findall(result.stderr) == []


def test_debug_shows_the_libraries_warnings(store: Path) -> None:
    result = train(store, 3, "--log-level", "DEBUG", "--no-progress")
    from_mlflow = [r for r in json_records(result.stderr) if r["logger"].startswith("mlflow")]
    assert any("CloudPickle" in r["message"] and r["level"] == "warning" for r in from_mlflow)
