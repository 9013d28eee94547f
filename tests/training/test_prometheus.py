"""Unit tests of the Prometheus source that need no server (the client call is replaced)."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from forecaster.exceptions import ConfigError
from tests.training.support import prometheus_config
from training.exceptions import HistoryFetchError, SourceError
from training.sources import prometheus as module
from training.sources.prometheus import PrometheusSource, plan_chunks

URL = "http://prometheus.example:9090"
T0 = 1_746_057_600  # 2025-05-01T00:00:00Z, a multiple of every step used here


def utc(seconds: float) -> pd.Timestamp:
    return pd.Timestamp(seconds, unit="s", tz="UTC")


# --- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        pytest.param({"url": "prometheus:9090"}, r"http://.*'prometheus:9090'", id="no-scheme"),
        pytest.param(
            {"timeout": 0}, r"timeout\s+Input should be greater than 0", id="zero-timeout"
        ),
        pytest.param({"retries": -1}, r"retries\s+Input should be greater", id="negative-retries"),
        pytest.param({"backoff": 5, "backoff_max": 1}, r"`backoff_max`", id="backoff-max-small"),
        pytest.param({"bearer_token": "t", "basic_auth": ("u", "p")}, r"exclusive", id="two-auths"),
        pytest.param({"insecure": True, "ca_bundle": Path("ca.pem")}, r"exclusive", id="tls"),
        pytest.param(
            {"max_points_per_request": 100, "point_margin": 99}, r"at least 2", id="margin"
        ),
        pytest.param({"point_margin": -1}, r"point_margin\s+Input should be", id="negative-margin"),
        pytest.param({"method": "PUT"}, r"method\s+Input should be 'GET' or 'POST'", id="method"),
    ],
)
def test_config_rejects_bad_values(settings: dict[str, Any], match: str) -> None:
    with pytest.raises((ConfigError, ValidationError), match=match):
        prometheus_config(**{"url": URL, **settings})


def test_config_defaults_stay_under_the_server_limit() -> None:
    config = prometheus_config(URL)
    assert config.settings.max_points_per_request == 11_000
    assert 0 < config.points_per_chunk < 11_000


def test_secrets_stay_out_of_repr() -> None:
    text = repr(prometheus_config(URL, bearer_token="s3cret"))
    text += repr(prometheus_config(URL, basic_auth=("user", "hunter2")))
    assert "s3cret" not in text
    assert "hunter2" not in text


@pytest.mark.parametrize(
    ("settings", "headers", "auth", "verify"),
    [
        pytest.param({}, None, None, True, id="plain"),
        pytest.param(
            {"bearer_token": "tok"}, {"Authorization": "Bearer tok"}, None, True, id="bearer"
        ),
        pytest.param({"basic_auth": ("u", "p")}, None, ("u", "p"), True, id="basic"),
        pytest.param({"ca_bundle": Path("/etc/ca.pem")}, None, None, "/etc/ca.pem", id="ca"),
        pytest.param({"insecure": True}, None, None, False, id="insecure"),
    ],
)
def test_credentials_and_tls_reach_the_client(
    settings: dict[str, Any], headers: Any, auth: Any, verify: Any
) -> None:
    source = PrometheusSource(prometheus_config(URL, **settings))
    client = source._connect()  # builds the session only, no request is sent
    try:
        assert client.headers == headers
        assert client.auth == auth
        assert client._session.verify == verify
    finally:
        source.close()


def test_fetch_error_is_a_source_error() -> None:
    assert issubclass(HistoryFetchError, SourceError)


# --- chunk planning ----------------------------------------------------------------------


def test_plan_chunks_example() -> None:
    assert plan_chunks(0, 600, 60, 4) == [(0, 180), (240, 420), (480, 600)]


@given(
    step=st.integers(min_value=1, max_value=3600),
    points=st.integers(min_value=1, max_value=5000),
    max_points=st.integers(min_value=1, max_value=700),
    ragged=st.integers(min_value=0, max_value=3599),
)
def test_chunks_cover_the_grid_exactly_once(
    step: int, points: int, max_points: int, ragged: int
) -> None:
    start = T0
    end = start + (points - 1) * step + ragged % step  # an end between grid points
    chunks = plan_chunks(start, end, step, max_points)
    covered = np.concatenate([np.arange(first, last + 1, step) for first, last in chunks])
    assert covered.tolist() == list(range(start, start + points * step, step))
    for first, last in chunks:
        assert (last - first) // step + 1 <= max_points
    assert len(chunks) == math.ceil(points / max_points)


def test_plan_chunks_rejects_an_inverted_range() -> None:
    with pytest.raises(ConfigError, match="end=0"):
        plan_chunks(60, 0, 60, 10)


# --- fetch with a stand-in for the HTTP call ---------------------------------------------


class FakeRange:
    """Replaces ``custom_query_range``: serves ``series[query]`` samples inside the range."""

    def __init__(self, series: dict[str, list[dict[str, Any]]]) -> None:
        self.series = series
        self.calls: list[tuple[str, float, float, str]] = []

    def __call__(
        self, query: str, start_time: datetime, end_time: datetime, step: str, **_: Any
    ) -> list[dict[str, Any]]:
        start, end = start_time.timestamp(), end_time.timestamp()
        self.calls.append((query, start, end, step))
        result = []
        for item in self.series.get(query, []):
            values = [[ts, v] for ts, v in item["values"] if start <= ts <= end]
            if values:
                result.append({"metric": item.get("metric", {}), "values": values})
        return result


@pytest.fixture
def fake_range(monkeypatch: pytest.MonkeyPatch) -> FakeRange:
    fake = FakeRange({})
    monkeypatch.setattr(
        module.PrometheusConnect, "custom_query_range", lambda self, *a, **k: fake(*a, **k)
    )
    return fake


def test_gaps_stay_missing_and_are_reported(fake_range: FakeRange) -> None:
    grid = [T0 + 60 * i for i in range(20)]
    values = {t: str(float(i)) for i, t in enumerate(grid)}
    for t in grid[5:8]:  # absent points
        del values[t]
    values[grid[12]] = "NaN"
    values[grid[13]] = "+Inf"
    fake_range.series["q"] = [{"metric": {}, "values": list(values.items())}]

    with PrometheusSource(prometheus_config(URL, max_points_per_request=6, point_margin=0)) as s:
        history = s.fetch({"w": "q"}, start=utc(grid[0]), end=utc(grid[-1]), step=60)

    got = history.frame["value"].to_numpy()
    missing = [5, 6, 7, 12, 13]
    assert np.isnan(got[missing]).all(), "no zero or forward fill"
    kept = [i for i in range(20) if i not in missing]
    assert got[kept].tolist() == [float(i) for i in kept]
    (report,) = history.reports
    assert [(r.start, r.end, r.points) for r in report.missing] == [
        (utc(grid[5]), utc(grid[7]), 3),
        (utc(grid[12]), utc(grid[13]), 2),
    ]
    assert (report.expected_points, report.received_points, report.requests) == (20, 15, 4)
    assert history.incomplete == (report,)
    assert len(fake_range.calls) == 4


def test_bounds_are_aligned_inward_to_the_step(fake_range: FakeRange) -> None:
    fake_range.series["q"] = [{"values": [[T0 + 300 * i, "1"] for i in range(10)]}]
    with PrometheusSource(prometheus_config(URL)) as source:
        history = source.fetch(
            {"w": "q"},
            start=pd.Timestamp(T0 + 1, unit="s", tz="UTC").tz_convert("Europe/Paris"),
            end=utc(T0 + 1799),
            step="5m",
        )
    assert (history.start, history.end) == (utc(T0 + 300), utc(T0 + 1500))
    assert history.frame["timestamp"].tolist() == [utc(T0 + 300 * i) for i in range(1, 6)]
    ((_, start, end, step),) = fake_range.calls
    assert (start, end, step) == (T0 + 300, T0 + 1500, "300")


@pytest.mark.parametrize(
    ("start", "end", "match"),
    [
        pytest.param(datetime(2025, 5, 1), utc(T0 + 600), r"`start` must be tz-aware", id="naive"),
        pytest.param(utc(T0 + 600), utc(T0), r"`end` must leave", id="inverted"),
        pytest.param(utc(T0 + 1), utc(T0 + 59), r"`end` must leave", id="no-grid-point"),
    ],
)
def test_bad_ranges_are_config_errors(start: Any, end: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PrometheusSource(prometheus_config(URL)).fetch({"w": "q"}, start, end, 60)


def test_covariates_become_columns(fake_range: FakeRange) -> None:
    grid = [T0 + 60 * i for i in range(3)]
    fake_range.series = {
        "demand_a": [{"values": [[t, "1"] for t in grid]}],
        "demand_b": [{"values": [[t, "2"] for t in grid]}],
        "gpu_a": [{"values": [[t, "50"] for t in grid]}],
    }
    with PrometheusSource(prometheus_config(URL)) as source:
        history = source.fetch(
            {"a": "demand_a", "b": "demand_b"},
            start=utc(grid[0]),
            end=utc(grid[-1]),
            step=60,
            covariates={"a": {"gpu": "gpu_a"}},
        )
    frame = history.frame
    assert list(frame.columns) == ["series", "timestamp", "value", "gpu"]
    assert frame.loc[frame["series"] == "a", "gpu"].tolist() == [50.0] * 3
    assert frame.loc[frame["series"] == "b", "gpu"].isna().all()
    assert [(r.workload, r.column) for r in history.reports] == [
        ("a", "value"),
        ("a", "gpu"),
        ("b", "value"),
    ]


@pytest.mark.parametrize(
    ("covariates", "match"),
    [
        pytest.param({"zz": {"gpu": "x"}}, r"without a query: \['zz'\]", id="unknown-workload"),
        pytest.param({"a": {"value": "x"}}, r"'value' is reserved", id="reserved-name"),
    ],
)
def test_bad_covariates(covariates: dict[str, dict[str, str]], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        PrometheusSource(prometheus_config(URL)).fetch(
            {"a": "q"}, utc(T0), utc(T0 + 60), 60, covariates=covariates
        )


def test_point_off_the_grid_is_an_error(fake_range: FakeRange) -> None:
    fake_range.series["q"] = [{"values": [[T0, "1"], [T0 + 30, "2"]]}]
    with pytest.raises(HistoryFetchError, match=r"off the requested grid.*'w'.*Query: 'q'"):
        PrometheusSource(prometheus_config(URL)).fetch({"w": "q"}, utc(T0), utc(T0 + 60), 60)


def test_malformed_series_is_an_error(fake_range: FakeRange) -> None:
    fake_range.series["q"] = [{"values": [[T0, "not-a-number"]]}]
    with pytest.raises(HistoryFetchError, match=r"malformed series for workload 'w'.*Query: 'q'"):
        PrometheusSource(prometheus_config(URL)).fetch({"w": "q"}, utc(T0), utc(T0 + 60), 60)
