"""A password in the MLflow store's URI reaches no error line and no log of a command, and
what no command foresaw ends in one line instead of a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from prewarm import cli as cli_module
from prewarm.exit_codes import ExitCode
from tests.prewarm.test_exit_codes import assert_exit, config_file, files_config, trace
from tests.serving.support import free_port

pytestmark = pytest.mark.usefixtures("isolated_logging")

SECRET = "s3cretPW"


def secret_store(tmp_path: Path, scheme: str = "http") -> Path:
    config = files_config(tmp_path, trace(tmp_path / "demand.csv", days=3))
    document = yaml.safe_load(config.read_text())
    document["mlflow"]["tracking_uri"] = f"{scheme}://admin:{SECRET}@127.0.0.1:{free_port()}/"
    return config_file(tmp_path, document)


@pytest.mark.parametrize(
    ("command", "extra"),
    [("train", ["--no-progress"]), ("manifests", ["--out", "manifests"])],
    ids=str,
)
def test_an_unreachable_store_is_named_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, extra: list[str]
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.chdir(tmp_path)
    config = secret_store(tmp_path)
    result = CliRunner().invoke(cli_module.cli, [command, "--config", str(config), *extra])
    assert_exit(result, ExitCode.FAILURE, "http://***@127.0.0.1")
    assert SECRET not in result.output


@pytest.mark.parametrize("scheme", ["ftp", "postgres"])
def test_a_scheme_mlflow_has_no_store_for_exits_2_naming_the_field(
    tmp_path: Path, scheme: str
) -> None:
    config = secret_store(tmp_path, scheme)
    result = CliRunner().invoke(cli_module.cli, ["train", "--config", str(config)])
    assert_exit(result, ExitCode.CONFIG, "`mlflow.tracking_uri`", f"{scheme}://***@", "postgresql")
    assert SECRET not in result.output


def test_the_flag_is_named_when_it_gave_the_uri(tmp_path: Path) -> None:
    config = files_config(tmp_path, trace(tmp_path / "demand.csv", days=3))
    result = CliRunner().invoke(
        cli_module.cli,
        ["manifests", "--config", str(config), "--tracking-uri", "ftp://x/", "--out", "m"],
    )
    assert_exit(result, ExitCode.CONFIG, "`--tracking-uri`", "'ftp'")


@pytest.mark.parametrize("command", ["train", "serve"])
@pytest.mark.parametrize(
    ("store", "expected"),
    [("text", "is not a SQLite database (it has no SQLite header)"), ("folder", "a folder")],
)
def test_a_store_path_that_is_no_sqlite_database_exits_2_before_any_work(
    tmp_path: Path, command: str, store: str, expected: str
) -> None:
    """MLflow opened it and failed on its first query with a multi-line SQL error: after
    train pulled its history, and in serve on every workload's every answer."""
    config = files_config(tmp_path, trace(tmp_path / "demand.csv", days=3))
    path = tmp_path / "notes.txt"
    if store == "text":
        path.write_text("not a db, a note\n")
    else:
        path.mkdir()
    result = CliRunner().invoke(
        cli_module.cli, [command, "--config", str(config), "--tracking-uri", f"sqlite:///{path}"]
    )
    assert_exit(result, ExitCode.CONFIG, "`--tracking-uri`", expected)
    assert "SELECT" not in result.output and "not a db" not in result.output  # nothing of it


def test_an_empty_sqlite_file_is_an_empty_store(tmp_path: Path) -> None:
    from training.settings import resolve_tracking_uri

    (tmp_path / "mlflow.db").touch()  # SQLite's empty database; MLflow creates its tables
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert resolve_tracking_uri(uri) == uri


def _explode() -> None:
    raise RuntimeError(f"driver said no to postgresql://admin:{SECRET}@db/prewarm")


def failed_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], failing: Any
) -> str:
    """What ``prewarm`` prints when ``failing`` stands for its command: exit 1 asserted."""
    monkeypatch.setattr(cli_module, "cli", failing)
    monkeypatch.delenv(cli_module.TRACEBACK_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as ended:
        cli_module.main()
    assert ended.value.code == ExitCode.FAILURE
    return capsys.readouterr().err


def test_an_unexpected_failure_is_one_line_without_credentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = failed_main(monkeypatch, capsys, _explode)
    assert err.startswith("Error: unexpected RuntimeError: driver said no to postgresql://***@db")
    assert "PREWARM_TRACEBACK=1" in err
    assert "Traceback" not in err and SECRET not in err


def _write_where_nothing_can_be() -> None:
    Path("/proc/prewarm-report/x.json").write_text("{}")  # the kernel's, never writable


def test_a_file_that_cannot_be_written_is_named_not_reported_as_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = failed_main(monkeypatch, capsys, _write_where_nothing_can_be)
    assert err == (
        "Error: cannot write or read '/proc/prewarm-report/x.json': No such file or directory\n"
    )


def test_the_traceback_is_there_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_module, "cli", _explode)
    monkeypatch.setenv(cli_module.TRACEBACK_VARIABLE, "1")
    with pytest.raises(RuntimeError, match="driver said no"):
        cli_module.main()
