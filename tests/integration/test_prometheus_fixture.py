"""The reusable Prometheus fixture: OpenMetrics rendering and live scraping."""

from __future__ import annotations

import time

import pytest
import requests
from prometheus_client import CollectorRegistry, Counter, start_http_server

from tests.integration.prometheus import Family, ServerFactory, free_port, render_openmetrics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_render_openmetrics_escapes_labels_and_names_counter_samples() -> None:
    text = render_openmetrics(
        [Family("jobs", "counter", [({"path": 'a"b\\c'}, [(1746057600, 3.0), (1746057660.5, 4)])])]
    )
    assert text.splitlines() == [
        "# TYPE jobs counter",
        'jobs_total{path="a\\"b\\\\c"} 3.0 1746057600',
        'jobs_total{path="a\\"b\\\\c"} 4.0 1746057660.5',
        "# EOF",
    ]


def test_render_openmetrics_rejects_unordered_points() -> None:
    with pytest.raises(ValueError, match="increasing time order"):
        render_openmetrics([Family("g", "gauge", [({}, [(10, 1.0), (10, 2.0)])])])


def test_server_scrapes_a_live_exporter(prometheus_factory: ServerFactory) -> None:
    registry = CollectorRegistry()
    requests_total = Counter("demo_requests", "Requests served.", registry=registry)
    port = free_port()
    exporter, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        requests_total.inc(7)
        server = prometheus_factory(
            scrape_configs=[
                {
                    "job_name": "demo",
                    "scrape_interval": "1s",
                    "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                }
            ]
        )
        deadline = time.monotonic() + 20
        value = None
        while time.monotonic() < deadline and value is None:
            answer = requests.get(
                f"{server.url}/api/v1/query", params={"query": "demo_requests_total"}, timeout=5
            ).json()
            result = answer["data"]["result"]
            value = float(result[0]["value"][1]) if result else None
            time.sleep(0.2)
        assert value == 7.0, f"no scrape within 20 s; server log:\n{server.log()[-2000:]}"
    finally:
        exporter.shutdown()
        thread.join(timeout=5)
