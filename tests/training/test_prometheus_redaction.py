"""The Prometheus source's errors and logs carry no credential and a bounded query.

Failures come from nothing listening on a port or from the tiny HTTP server of the
Prometheus failure tests answering an error that quotes the request's credentials.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pandas as pd
import pytest

from tests.integration.prometheus import free_port
from tests.integration.test_prometheus_failures import Behaviour, FakePrometheus, json_reply
from tests.training.support import prometheus_config
from training.exceptions import HistoryFetchError
from training.sources.prometheus import PrometheusSource

pytestmark = pytest.mark.timeout(60)

START = pd.Timestamp("2025-05-01T00:00:00Z")
END = pd.Timestamp("2025-05-01T01:00:00Z")
QUERY = "sum(rate(x[5m]))"


@pytest.fixture
def fake() -> Iterator[Callable[[Behaviour], FakePrometheus]]:
    servers: list[FakePrometheus] = []

    def start(behaviour: Behaviour) -> FakePrometheus:
        servers.append(FakePrometheus(behaviour).__enter__())
        return servers[-1]

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def failure(url: str, query: str = QUERY, **settings: object) -> HistoryFetchError:
    config = prometheus_config(url, **{"retries": 0, "backoff": 0.01, **settings})
    with PrometheusSource(config) as source, pytest.raises(HistoryFetchError) as caught:
        source.fetch({"chat": query}, start=START, end=END, step="1m")
    return caught.value


def test_url_userinfo_is_not_in_the_error_or_the_retry_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://bob:s3cret@127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="training.sources.prometheus"):
        error = failure(url, retries=1)
    assert "cannot connect to http://***@127.0.0.1" in str(error)
    assert caplog.records, "the retry is logged"
    for text in [str(error), caplog.text]:
        assert "s3cret" not in text
        assert "bob:" not in text
    assert error.__cause__ is None  # a logged chain would quote the URL again


@pytest.mark.parametrize(
    ("secrets", "echoed"),
    [
        pytest.param({"basic_auth": ("bob", "hunter2")}, "hunter2", id="basic-auth"),
        pytest.param({"bearer_token": "tok-123.abc"}, "tok-123.abc", id="bearer"),
    ],
)
def test_a_server_answer_quoting_the_credentials_is_redacted(
    fake: Callable[[Behaviour], FakePrometheus], secrets: dict[str, object], echoed: str
) -> None:
    body = f'{{"status":"error","errorType":"unauthorized","error":"rejected {echoed}"}}'
    server = fake(json_reply(401, body))
    error = failure(server.url, **secrets)
    assert "HTTP 401: unauthorized: rejected ***" in str(error)
    assert echoed not in str(error)


def test_a_long_query_is_echoed_bounded() -> None:
    query = "sum(" + "x" * 5000 + ")"
    error = failure(f"http://127.0.0.1:{free_port()}", query=query)
    assert "sum(xxx" in str(error)
    assert "(5007 chars)" in str(error)
    assert len(str(error)) < 600
