"""Every command exits by one table (prewarm.exit_codes): 2 for a bad configuration or flag,
3 for a bad data file, with one line naming what is wrong and no traceback."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result

from prewarm.cli import cli
from prewarm.exit_codes import ExitCode

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
BAD_CONFIG = {"source": {"type": "file", "path": "x.csv"}, "workloads": [{"name": "chat"}]}
# A 2 GB address-space limit: numpy, pandas and LightGBM fit in it with room to spare (their
# imports peak near 0.6 GB); an allocation sized by an outlier does not.
ADDRESS_SPACE = 2_000_000 * 1024


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def trace(path: Path, outlier: float | None = None, days: int = 6) -> Path:
    """A 5-minute demand series, with ``outlier`` at row 100 (line 102) when given."""
    times = pd.date_range("2025-01-01", periods=days * 288, freq="5min", tz="UTC")
    values = 5 + 2 * np.sin(np.arange(len(times)) * 2 * np.pi / 288)
    if outlier is not None:
        values[100] = outlier
    frame = pd.DataFrame({"timestamp": times.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values})
    frame.to_csv(path, index=False)
    return path


def config_file(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "prewarm.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def files_config(tmp_path: Path, data: Path, source: str = "file") -> Path:
    return config_file(
        tmp_path,
        {
            "source": {"type": source, "files": {"chat": str(data)}, "step": "5m"},
            "workloads": [{"name": "chat", "capacity": {"capacity_per_replica": 1}}],
            "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
        },
    )


def assert_exit(result: Result, code: ExitCode, *named: str) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    for text in named:
        assert text in result.output


OUTLIER = "line 102 (series 'demand', 2025-01-01T08:20:00+00:00): 1e+15"


# -- evaluate ---------------------------------------------------------------------------------


def test_evaluate_unknown_model_exits_2(tmp_path: Path) -> None:
    result = invoke("evaluate", str(trace(tmp_path / "demand.csv")), "--models", "nope")
    assert_exit(result, ExitCode.CONFIG, "unknown model 'nope'")


def test_evaluate_1e308_is_refused_with_the_row_and_exits_3(tmp_path: Path) -> None:
    data = trace(tmp_path / "demand.csv", outlier=1e308)
    out = tmp_path / "report.json"
    result = invoke("evaluate", str(data), "--json", str(out))
    assert_exit(result, ExitCode.DATA, "beyond the sane range", "line 102", "1e+308")
    assert not out.exists()


def test_evaluate_missing_file_exits_3(tmp_path: Path) -> None:
    result = invoke("evaluate", str(tmp_path / "nothing.csv"))
    assert_exit(result, ExitCode.DATA, "does not exist")


# -- backtest ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "--eval-days", "nan"], "--eval-days must be a finite number > 0, got 'nan'"),
        (["evaluate", "--eval-days", "inf"], "--eval-days must be a finite number > 0, got 'inf'"),
        (["evaluate", "--eval-days", "-1"], "--eval-days must be a finite number > 0, got '-1'"),
        (
            ["backtest", "--capacity-per-replica", "nan"],
            "--capacity-per-replica must be a finite number > 0, got 'nan'",
        ),
        (["backtest", "--seed", "-1"], "-1 is not in the range 0<=x<=2147483647"),
        (["evaluate", "--models", ","], "`--models` names nothing, got ','"),
        (["backtest", "--policies", ""], "`--policies` names nothing, got ''"),
    ],
)
def test_a_value_no_flag_can_take_exits_2_naming_it(
    tmp_path: Path, args: list[str], message: str
) -> None:
    command, *flags = args
    result = invoke(command, str(trace(tmp_path / "demand.csv", days=2)), *flags)
    assert_exit(result, ExitCode.CONFIG, message)


def test_serve_port_out_of_range_exits_2(tmp_path: Path) -> None:
    config = config_file(tmp_path, {"unread": "flags are checked first"})
    result = invoke("serve", "--config", str(config), "--port", "99999")
    assert_exit(result, ExitCode.CONFIG, "99999 is not in the range 0<=x<=65535")


def test_backtest_bad_config_exits_2(tmp_path: Path) -> None:
    result = invoke("backtest", "--config", str(config_file(tmp_path, BAD_CONFIG)))
    assert_exit(result, ExitCode.CONFIG, "workloads[0] (chat).capacity: required field")


def test_backtest_outlier_exits_3_naming_row_and_value(tmp_path: Path) -> None:
    result = invoke("backtest", str(trace(tmp_path / "demand.csv", outlier=1e15)))
    assert_exit(result, ExitCode.DATA, OUTLIER)


def test_backtest_peak_needing_too_many_replicas_exits_3(tmp_path: Path) -> None:
    result = invoke("backtest", str(trace(tmp_path / "demand.csv", outlier=1e11)))
    assert_exit(result, ExitCode.DATA, "more than the limit of 100,000", "--capacity-per-replica")


@pytest.mark.parametrize(("outlier", "message"), [(1e15, "line 102"), (1e11, "limit of 100,000")])
def test_backtest_outlier_refuses_within_2_gb(tmp_path: Path, outlier: float, message: str) -> None:
    """The reported failure: one outlier grew the backtest to 19.9 GB before the kernel
    killed it. Under a 2 GB address-space limit it must refuse with a clear message."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    data = trace(tmp_path / "demand.csv", outlier=outlier)
    run = subprocess.run(
        [sys.executable, "-m", "prewarm", "backtest", str(data)],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == ExitCode.DATA, run.stderr[-2000:]
    assert "MemoryError" not in run.stderr and "Traceback" not in run.stderr
    assert message in run.stderr, run.stderr[-2000:]


# -- train, demo, manifests, serve, shadow-report ---------------------------------------------


@pytest.mark.parametrize(
    "command", ["train", "manifests", "serve", "shadow-report", "demo"], ids=str
)
def test_bad_config_exits_2(tmp_path: Path, command: str) -> None:
    config = config_file(tmp_path, BAD_CONFIG)
    result = invoke(command, "--config", str(config))
    assert_exit(result, ExitCode.CONFIG, "capacity: required field is missing")


@pytest.mark.parametrize(("command", "source"), [("train", "file"), ("demo", "replay")])
def test_bad_data_file_exits_3(tmp_path: Path, command: str, source: str) -> None:
    data = trace(tmp_path / "demand.csv", outlier=1e15)
    config = files_config(tmp_path, data, source)
    extra = ["--out", str(tmp_path / "out")] if command == "demo" else ["--no-progress"]
    result = invoke(command, "--config", str(config), *extra)
    assert_exit(result, ExitCode.DATA, "line 102", "1e+15")


def test_train_missing_data_file_exits_3(tmp_path: Path) -> None:
    config = files_config(tmp_path, tmp_path / "gone.csv")
    result = invoke("train", "--config", str(config), "--no-progress")
    assert_exit(result, ExitCode.DATA, "gone.csv")


def test_help_epilogs_list_the_codes() -> None:
    commands = ["train", "evaluate", "backtest", "manifests"]
    for command in [*commands, "serve", "certs", "shadow-report", "demo"]:
        text = invoke(command, "--help").output
        assert "Exit codes:" in text
        assert "  2  " in text and "  3  " in text, command


def test_json_reports_are_valid_json(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    data = trace(tmp_path / "demand.csv", days=3)
    result = invoke(
        "evaluate", str(data), "--horizon", "10m", "--eval-days", "1", "--models", "last-value",
        "--json", str(out),
    )  # fmt: skip
    assert_exit(result, ExitCode.OK)
    json.loads(out.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))
