"""PrometheusSource when the server is down, slow or answers nonsense.

Each failure is injected by a tiny HTTP server on 127.0.0.1 (or by nothing listening);
every one must end in a HistoryFetchError that names the workload, the query and the cause.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pandas as pd
import pytest

from tests.integration.prometheus import free_port
from tests.training.support import prometheus_config
from training.exceptions import HistoryFetchError
from training.sources.prometheus import PrometheusSource

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

WORKLOAD = "chat"
QUERY = 'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))'
START = pd.Timestamp("2025-05-01T00:00:00Z")
END = pd.Timestamp("2025-05-01T06:00:00Z")

Reply = tuple[int, str, bytes]  # status, content type, body
Behaviour = Callable[[dict[str, list[str]]], Reply]


class FakePrometheus:
    """Answers every request with ``behaviour(query_params)`` and records the requests."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[dict[str, list[str]]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                params = parse_qs(urlparse(self.path).query)
                fake.requests.append(params)
                status, content_type, body = fake.behaviour(params)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep pytest output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakePrometheus:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()  # unblock a handler that is hanging on purpose
        self.server.shutdown()
        self.server.server_close()


def json_reply(status: int, body: str) -> Behaviour:
    return lambda params: (status, "application/json", body.encode())


def fetch(url: str, **settings: object) -> None:
    config = prometheus_config(url, **{"retries": 0, "backoff": 0.01, **settings})
    with PrometheusSource(config) as source:
        source.fetch({WORKLOAD: QUERY}, start=START, end=END, step="1m")


def assert_names_workload_and_query(error: HistoryFetchError) -> str:
    message = str(error)
    assert f"'{WORKLOAD}'" in message
    assert f"Query: {QUERY!r}" in message
    return message


@pytest.fixture
def fake() -> Iterator[Callable[[Behaviour], FakePrometheus]]:
    servers: list[FakePrometheus] = []

    def start(behaviour: Behaviour) -> FakePrometheus:
        server = FakePrometheus(behaviour).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_server_down_is_retried_then_reported() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(HistoryFetchError) as caught:
        fetch(url, retries=2)
    message = assert_names_workload_and_query(caught.value)
    assert f"cannot connect to {url}" in message
    assert "Connection refused" in message
    assert "after 3 attempts" in message


def test_slow_server_times_out(fake: Callable[[Behaviour], FakePrometheus]) -> None:
    def hang(params: dict[str, list[str]]) -> Reply:
        server.release.wait(timeout=30)
        return 200, "application/json", b'{"status":"success","data":{"result":[]}}'

    server = fake(hang)
    began = time.monotonic()
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url, timeout=0.5)
    elapsed = time.monotonic() - began
    message = assert_names_workload_and_query(caught.value)
    assert "no answer within the 0.5 s timeout" in message
    assert elapsed < 5, f"the timeout did not cut the request short ({elapsed:.1f} s)"
    assert len(server.requests) == 1


def test_http_500_is_retried_with_backoff_then_reported(
    fake: Callable[[Behaviour], FakePrometheus],
) -> None:
    server = fake(json_reply(500, '{"status":"error","errorType":"internal","error":"boom"}'))
    began = time.monotonic()
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url, retries=2, backoff=0.2)
    elapsed = time.monotonic() - began
    message = assert_names_workload_and_query(caught.value)
    assert "HTTP 500: internal: boom" in message
    assert "after 3 attempts" in message
    assert len(server.requests) == 3
    assert elapsed >= 0.2 + 0.4, "the delays between attempts double"


def test_malformed_json_is_reported_without_retry(
    fake: Callable[[Behaviour], FakePrometheus],
) -> None:
    server = fake(json_reply(200, '{"status": "success", "data": {"result": [oops'))
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url, retries=2)
    message = assert_names_workload_and_query(caught.value)
    assert "not valid JSON" in message
    assert "[oops" in message
    assert len(server.requests) == 1


def test_json_that_is_not_a_query_result(fake: Callable[[Behaviour], FakePrometheus]) -> None:
    server = fake(json_reply(200, '{"hello": "world"}'))
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url)
    message = assert_names_workload_and_query(caught.value)
    assert "not a Prometheus query_range result" in message


def test_no_series_is_an_error_not_an_empty_history(
    fake: Callable[[Behaviour], FakePrometheus],
) -> None:
    server = fake(
        json_reply(200, '{"status":"success","data":{"resultType":"matrix","result":[]}}')
    )
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url)
    message = assert_names_workload_and_query(caught.value)
    assert "returned no series" in message
    # the query went out with the aligned UTC range and the step in seconds
    (params,) = server.requests
    assert params["query"] == [QUERY]
    assert params["start"] == [str(int(START.timestamp()))]
    assert params["end"] == [str(int(END.timestamp()))]
    assert params["step"] == ["60"]


def test_client_error_is_not_retried(fake: Callable[[Behaviour], FakePrometheus]) -> None:
    server = fake(
        json_reply(400, '{"status":"error","errorType":"bad_data","error":"parse error"}')
    )
    with pytest.raises(HistoryFetchError) as caught:
        fetch(server.url, retries=3)
    message = assert_names_workload_and_query(caught.value)
    assert "HTTP 400: bad_data: parse error" in message
    assert len(server.requests) == 1
