"""A remote MLflow store that refuses connections is named at once, not after MLflow's
minutes of silent retries; one that answers, a local store, or one behind a proxy is left
to MLflow."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from tests.serving.support import free_port
from training import store
from training.store import store_client, unreachable


@pytest.fixture(autouse=True)
def fresh_looks() -> Iterator[None]:
    store._look_once.cache_clear()
    yield
    store._look_once.cache_clear()


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.mark.usefixtures("no_proxy")
def test_a_store_that_refuses_connections_is_named_with_why() -> None:
    port = free_port()
    assert unreachable(f"http://127.0.0.1:{port}/") == f"127.0.0.1:{port}: Connection refused"


@pytest.mark.usefixtures("no_proxy")
def test_a_store_that_accepts_a_connection_is_left_to_mlflow() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}/") is None


@pytest.mark.parametrize(
    "uri", ["sqlite:///mlflow.db", "/var/mlruns", "file:///var/mlruns", "databricks"]
)
def test_a_local_store_is_not_looked_at(uri: str) -> None:
    assert unreachable(uri) is None


def test_a_store_behind_a_proxy_is_left_to_mlflow(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy, not the store's own address, is what MLflow connects to."""
    monkeypatch.setenv("http_proxy", "http://proxy.internal:3128")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)  # a CI's NO_PROXY=127.0.0.1 would bypass it
    assert unreachable(f"http://127.0.0.1:{free_port()}/") is None


@pytest.mark.usefixtures("no_proxy")
def test_the_warning_comes_before_mlflow_s_retries_and_hides_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    uri = f"http://admin:s3cret@127.0.0.1:{free_port()}/"
    with caplog.at_level(logging.WARNING, logger="training.store"):
        store_client(uri)
        store_client(uri)  # serve asks on every poll: one warning per store and process
    [record] = caplog.records
    assert record.getMessage().startswith("MLflow store 'http://***@127.0.0.1:")
    assert "Connection refused" in record.getMessage()
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" in record.getMessage()
    assert "s3cret" not in record.getMessage()
