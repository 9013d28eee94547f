"""``prewarm serve`` checks every setting before anything starts: a mistake is one ``Error:``
line naming the flag or variable, exit code 2, and no server, no store, no traceback."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner, Result

from prewarm.certs import issue, new_ca
from prewarm.cli import cli
from prewarm.exit_codes import ExitCode
from tests.prewarm.test_exit_codes import files_config, trace
from tests.serving.pki import VALID_DAYS, VALID_FROM, write_issued
from tests.serving.support import wait_until
from training.sources.files import SMALL_FILE_LIMIT


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs ``prewarm serve`` on a valid config with extra flags and variables; a server
    that starts fails the test (each case must be refused before it)."""

    def started(self: uvicorn.Server, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(uvicorn.Server, "run", started)
    config = files_config(tmp_path, trace(tmp_path / "demand.csv", days=1))

    def invoke(*flags: str, **variables: str) -> Result:
        # Free ports unless a case sets them: the checks bind each once.
        env = {"PREWARM_PORT": "0", "PREWARM_GRPC_PORT": "0", **variables}
        return CliRunner().invoke(cli, ["serve", "--config", str(config), *flags], env=env)

    return invoke


def _refused(result: Result, *named: str) -> None:
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    # Pydantic's own report (input_value=..., its errors.pydantic.dev links) stays out.
    assert "pydantic" not in result.output and "input_value" not in result.output
    for text in named:
        assert text in errors[0], errors[0]


def _blank_file(tmp_path: Path) -> str:
    path = tmp_path / "token"
    path.write_text(" \n\t\n")
    return str(path)


def test_a_blank_token_file_is_refused_before_the_server_starts(serve: Any, tmp_path: Path) -> None:
    """It used to be refused by the started server, with a traceback and exit code 3."""
    result = serve("--token-file", _blank_file(tmp_path))
    _refused(result, "--token-file", "is empty or blank")
    result = serve(PREWARM_TOKEN_FILE=_blank_file(tmp_path))
    _refused(result, "PREWARM_TOKEN_FILE", "is empty or blank")


def _large_file(tmp_path: Path) -> str:
    path = tmp_path / "large"
    with path.open("wb") as file:  # sparse: no disk is filled
        file.truncate(SMALL_FILE_LIMIT + 1)
    return str(path)


@pytest.mark.parametrize("where", ["large", "/dev/zero"])
def test_a_token_or_certificate_file_too_large_is_refused_naming_its_flag(
    serve: Any, tmp_path: Path, where: str
) -> None:
    """A path set by mistake to a large file or a device is not read whole (``/dev/zero``
    never ends)."""
    path = _large_file(tmp_path) if where == "large" else where
    _refused(serve("--token-file", path), "--token-file", "larger than 1,048,576 bytes")
    ca = new_ca("CA", VALID_FROM, VALID_DAYS)
    cert, key = write_issued(tmp_path, "serve", issue(ca, "x", VALID_FROM, days=VALID_DAYS))
    (tmp_path / "mlflow.db").touch()  # the config's store: the certificate is read after it
    for flag, flags in (
        ("--tls-cert", ["--tls-cert", path, "--tls-key", str(key)]),
        ("--tls-key", ["--tls-cert", str(cert), "--tls-key", path]),
    ):
        _refused(serve(*flags), flag, "larger than 1,048,576 bytes")


def test_a_blank_token_variable_is_refused_without_echoing_it(serve: Any) -> None:
    _refused(serve(PREWARM_TOKEN="   "), "PREWARM_TOKEN", "is set but blank")


@pytest.mark.parametrize(
    ("flags", "variables", "named"),
    [
        (["--log-level", "LOUD"], {}, ["'--log-level'", "'LOUD' is not one of"]),
        ([], {"PREWARM_LOG_LEVEL": "LOUD"}, ["PREWARM_LOG_LEVEL: must be one of DEBUG"]),
        (["--shard", "3/2"], {}, ["--shard: a shard is K/N with 1 <= K <= N, got 3/2"]),
        ([], {"PREWARM_SHARD": "3/2"}, ["PREWARM_SHARD: a shard is K/N"]),
        ([], {"PREWARM_PORT": "http"}, ["PREWARM_PORT: Input should be a valid integer", "'http'"]),
        (["--tls-cert", "CERT"], {}, ["`tls_cert` needs `tls_key` (--tls-key or PREWARM_TLS_KEY)"]),
        (["--tls-key", "CERT"], {}, ["`tls_key` needs `tls_cert` (--tls-cert or"]),
        (
            ["--tls-check-interval=-1"],
            {},
            ["--tls-check-interval: Input should be greater than or equal to 0, got -1.0"],
        ),
        ([], {"PREWARM_TLS_CHECK_INTERVAL": "nan"}, ["PREWARM_TLS_CHECK_INTERVAL: Input should"]),
        (["--host", "999.1.1.1"], {}, ["--host '999.1.1.1' is not an address"]),
        ([], {"PREWARM_HOST": "192.0.2.1"}, ["PREWARM_HOST '192.0.2.1' is not an address of"]),
    ],
    ids=[
        "log-level-flag",
        "log-level-variable",
        "shard-flag",
        "shard-variable",
        "port-variable",
        "cert-without-key",
        "key-without-cert",
        "tls-check-interval-flag",
        "tls-check-interval-variable",
        "host-unknown",
        "host-not-here",
    ],
)
def test_a_bad_setting_is_one_line_naming_its_flag_or_variable(
    serve: Any, tmp_path: Path, flags: list[str], variables: dict[str, str], named: list[str]
) -> None:
    certificate = tmp_path / "cert.pem"
    certificate.write_text("not read before the check")
    flags = [str(certificate) if flag == "CERT" else flag for flag in flags]
    _refused(serve(*flags, **variables), *named)


def test_a_key_that_is_not_the_certificate_s_is_refused_before_the_server_starts(
    serve: Any, tmp_path: Path
) -> None:
    """It used to end in an SSLError traceback from uvicorn's start, exit code 1."""
    ca = new_ca("CA", VALID_FROM, VALID_DAYS)
    cert, _ = write_issued(tmp_path, "server", issue(ca, "server", VALID_FROM, days=VALID_DAYS))
    _, key = write_issued(tmp_path, "other", issue(ca, "other", VALID_FROM, days=VALID_DAYS))
    (tmp_path / "mlflow.db").touch()  # the config's store: the certificate is read after it
    result = serve("--tls-cert", str(cert), "--tls-key", str(key))
    _refused(result, "`tls_key` (--tls-key or PREWARM_TLS_KEY)", "is not the key of the")
    assert "PRIVATE KEY" not in result.output


def test_a_port_in_use_is_named(serve: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        _refused(serve("--port", port), f"--port {port}: cannot listen", "in use")
        _refused(serve("--grpc-port", port), f"--grpc-port {port}: cannot listen")


def test_a_missing_sqlite_store_is_named_and_not_created(serve: Any, tmp_path: Path) -> None:
    """It used to be created, folders and all, and then served "no champion alias yet"."""
    store = tmp_path / "nonexist" / "mlflow.db"
    _refused(serve("--tracking-uri", f"sqlite:///{store}"), f"MLflow store '{store}'")
    assert not store.parent.exists()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_a_server_asked_to_stop_exits_0(tmp_path: Path, stop: signal.Signals) -> None:
    """uvicorn raises the stop signal again once it has shut down: the process ended by
    SIGTERM (143) and Ctrl-C printed "Aborted!" with exit 1, where the table says 0."""
    from training.store import store_client

    config = files_config(tmp_path, trace(tmp_path / "demand.csv", days=1))
    store_client(f"sqlite:///{tmp_path / 'mlflow.db'}").search_registered_models()  # empty
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-c", "from prewarm.cli import main; main()", "serve", "--config",
         str(config), "--port", str(port), "--grpc-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_until(lambda: _answers(port, process), timeout=60, every=0.2)
        process.send_signal(stop)
        output, _ = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, output.decode()[-2000:]
    assert b"Aborted!" not in output and b"Traceback" not in output


def _answers(port: int, process: subprocess.Popen[bytes]) -> bool:
    assert process.poll() is None, "prewarm serve exited before it answered"
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
