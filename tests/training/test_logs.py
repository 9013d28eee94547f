"""Logging setup of the commands: JSON lines or a terminal console, libraries quiet but at DEBUG."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings

import pytest
from rich.console import Console

from training.logs import configure_logging, log_console

pytestmark = pytest.mark.usefixtures("isolated_logging")


def records(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def emit_one_of_each() -> None:
    logging.getLogger("training.pipeline").info("stage fit", extra={"workload": "chat"})
    logging.getLogger("mlflow.pyfunc").warning("a library's advice")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a library's warning", UserWarning, stacklevel=1)


@pytest.mark.parametrize(
    ("level", "loggers"),
    [
        ("INFO", ["training.pipeline"]),
        ("WARNING", []),
        ("DEBUG", ["training.pipeline", "mlflow.pyfunc", "py.warnings"]),
    ],
    ids=["info-hides-libraries", "warning-hides-info", "debug-shows-libraries"],
)
def test_json_lines_and_libraries_only_at_debug(
    monkeypatch: pytest.MonkeyPatch, level: str, loggers: list[str]
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging(level)
    emit_one_of_each()
    found = records(stream)
    assert [r["logger"] for r in found] == loggers
    assert all(r["message"] for r in found)
    if loggers:
        assert found[0]["workload"] == "chat"


def test_no_credential_reaches_the_log(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging("INFO")
    try:
        raise ConnectionError("refused: postgresql://admin:s3cret@db:5432/prewarm")
    except ConnectionError:
        logging.getLogger("mlflow.store").exception(
            "cannot open %s", "http://bob:hunter2@mlflow:5000", extra={"query": "?token=t0k"}
        )
    (record,) = records(stream)
    assert record["message"] == "cannot open http://***@mlflow:5000"
    assert record["query"] == "?token=***"
    assert "postgresql://***@db:5432" in record["exception"]
    for secret in ("s3cret", "hunter2", "t0k"):
        assert secret not in stream.getvalue()


def test_library_errors_always_show(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    configure_logging("INFO")
    logging.getLogger("mlflow.store").error("cannot write the run")
    assert [r["message"] for r in records(stream)] == ["cannot write the run"]


def test_terminal_console_carries_the_logs_and_is_shared() -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    configure_logging("INFO", terminal)
    logging.getLogger("prewarm.train").info("stage promote")
    assert log_console() is terminal  # so the progress bar draws on the same console
    assert "stage promote" in screen.getvalue()
    assert "{" not in screen.getvalue()


def test_no_console_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    configure_logging("INFO")
    assert log_console() is None


# A fresh interpreter, where MLflow is not yet imported: it is imported after the routing.
MLFLOW_AFTER = """
import logging, sys
from training.logs import configure_logging
configure_logging("INFO")
print("mlflow" in sys.modules, flush=True)
import mlflow
logging.getLogger("mlflow.store").error("cannot write the run")
"""


def test_mlflow_imported_later_keeps_the_routing() -> None:
    done = subprocess.run(
        [sys.executable, "-c", MLFLOW_AFTER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"  # a command that does not use it does not import it
    (line,) = done.stderr.splitlines()
    assert json.loads(line)["message"] == "cannot write the run"
