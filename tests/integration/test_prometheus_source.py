"""PrometheusSource against a real Prometheus filled with known history.

Two days of 1-minute samples for three workloads are backfilled with promtool:

- ``chat``: a request counter growing at exactly 2.5 req/s that restarts twice, plus two
  GPU-utilisation gauges (``DCGM_FI_DEV_GPU_UTIL``) used as a covariate;
- ``embed``: a queue-depth gauge with a two-hour hole;
- ``rerank``: a counter whose rate steps from 1 to 3 req/s, with one restart.

Samples sit 30 s off the query grid, as real scrapes do, so each grid point reads the
sample 30 s before it; expected values are derived from the written samples with
Prometheus's rules (5-minute lookback, ``rate`` = per-second increase with resets counted
as restarts from zero), never copied from an earlier run.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

from forecaster.frame import validate_frame
from tests.integration.prometheus import Counter, Family, Gauge, PrometheusServer, ServerFactory
from tests.training.support import prometheus_config
from training.exceptions import HistoryFetchError
from training.sources.prometheus import PrometheusSource

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T0 = 1_746_057_600  # 2025-05-01T00:00:00Z
SCRAPE = 60
OFFSET = 30  # samples are scraped 30 s after each grid point
N = 2 * 1440  # two days of samples
LOOKBACK = 300  # Prometheus's default --query.lookback-delta
RATE_WINDOW = 300  # the [5m] in the rate queries below

CHAT_RATE = 2.5
CHAT_RESETS = (900, 2100)
RERANK_RATES = (1.0, 3.0)  # before / from sample 1440
RERANK_RESET = 2500
EMBED_GAP = range(1500, 1620)  # sample indices left out (two hours)

QUERIES = {
    "chat": 'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))',
    "embed": 'sum(vllm:num_requests_waiting{model_name="embed"})',
    "rerank": 'sum(rate(vllm:request_success_total{model_name="rerank"}[5m]))',
}
COVARIATES = {"chat": {"gpu_util": 'avg(DCGM_FI_DEV_GPU_UTIL{pod=~"chat-.*"})'}}

# Grid of the main test: starts once the first rate window is full, ends at the last sample.
START = T0 + 600
END = T0 + (N - 1) * SCRAPE


def sample_time(i: int) -> int:
    return T0 + i * SCRAPE + OFFSET


def counter_points(increments: list[float], resets: tuple[int, ...], first: float) -> list:
    """Cumulative counter; at a reset index the counter restarts from 0 and gains that step."""
    value, points = first, [(sample_time(0), first)]
    for i in range(1, N):
        value = increments[i] if i in resets else value + increments[i]
        points.append((sample_time(i), value))
    return points


CHAT_INCREMENTS = [CHAT_RATE * SCRAPE] * N
RERANK_INCREMENTS = [(RERANK_RATES[0] if i < 1440 else RERANK_RATES[1]) * SCRAPE for i in range(N)]
CHAT_COUNTER = counter_points(CHAT_INCREMENTS, CHAT_RESETS, first=1000.0)
RERANK_COUNTER = counter_points(RERANK_INCREMENTS, (RERANK_RESET,), first=500.0)
EMBED_QUEUE = [
    (sample_time(i), float((i * 7) % 23) + 0.25 * (i % 4)) for i in range(N) if i not in EMBED_GAP
]
GPU = {
    pod: [(sample_time(i), float((i * 13 + k * 37) % 101)) for i in range(N)]
    for k, pod in enumerate(("chat-0", "chat-1", "embed-0"))
}


def history() -> list[Family]:
    return [
        Counter(
            "vllm:request_success",
            [
                ({"model_name": "chat", "finished_reason": "stop"}, CHAT_COUNTER),
                ({"model_name": "rerank", "finished_reason": "stop"}, RERANK_COUNTER),
            ],
            help="Finished requests.",
        ),
        Gauge("vllm:num_requests_waiting", [({"model_name": "embed", "engine": "0"}, EMBED_QUEUE)]),
        Gauge(
            "DCGM_FI_DEV_GPU_UTIL",
            [({"pod": pod, "gpu": str(k)}, GPU[pod]) for k, pod in enumerate(GPU)],
        ),
    ]


def lookback_value(points: list[tuple[int, float]], t: int) -> float:
    """What an instant selector returns at ``t``: the newest sample within the lookback."""
    times = [ts for ts, _ in points]
    index = bisect_right(times, t) - 1
    if index < 0 or t - points[index][0] >= LOOKBACK:
        return math.nan
    return points[index][1]


def prometheus_rate(points: list[tuple[int, float]], t: int) -> float:
    """``rate(x[5m])`` at ``t``, following Prometheus's ``extrapolatedRate``.

    A decrease counts as a restart from zero; the sampled increase is extrapolated to the
    window edges when they are within 1.1 average sample intervals (else by half an
    interval), and not below the counter's extrapolated zero point.
    """
    times = [ts for ts, _ in points]
    inside = points[bisect_left(times, t - RATE_WINDOW) : bisect_right(times, t)]
    if len(inside) < 2:
        return math.nan
    increase = inside[-1][1] - inside[0][1]
    increase += sum(prev for (_, prev), (_, cur) in pairwise(inside) if cur < prev)
    sampled = float(inside[-1][0] - inside[0][0])
    average = sampled / (len(inside) - 1)
    to_start = float(inside[0][0] - (t - RATE_WINDOW))
    to_end = float(t - inside[-1][0])
    if increase > 0 and inside[0][1] >= 0:
        to_start = min(to_start, sampled * inside[0][1] / increase)
    interval = sampled
    interval += to_start if to_start < average * 1.1 else average / 2
    interval += to_end if to_end < average * 1.1 else average / 2
    return increase * interval / sampled / RATE_WINDOW


def grid(start: int, end: int, step: int) -> np.ndarray:
    return np.arange(start, end + 1, step)


def utc(seconds: int) -> pd.Timestamp:
    return pd.Timestamp(seconds, unit="s", tz="UTC")


@pytest.fixture(scope="module")
def server(prometheus_factory: ServerFactory) -> PrometheusServer:
    return prometheus_factory(history())


def source(server: PrometheusServer, **overrides: object) -> PrometheusSource:
    settings: dict = {"retries": 0, **overrides}
    return PrometheusSource(prometheus_config(server.url, **settings))


def test_chunked_pull_equals_written_history(server: PrometheusServer) -> None:
    with source(server, max_points_per_request=500, point_margin=0) as src:
        history_ = src.fetch(
            QUERIES, start=utc(START), end=utc(END), step="1m", covariates=COVARIATES
        )

    points = grid(START, END, SCRAPE)
    assert len(points) > 5 * 500, "the range must need several chunks"
    frame = history_.frame
    assert list(frame.columns) == ["series", "timestamp", "value", "gpu_util"]
    # the project's data contract, gaps allowed as NaN
    validate_frame(frame, covariates=["gpu_util"], allow_missing=True)
    assert str(frame["timestamp"].dt.tz) == "UTC"
    reports = {(r.workload, r.column): r for r in history_.reports}
    assert set(reports) == {
        ("chat", "value"),
        ("chat", "gpu_util"),
        ("embed", "value"),
        ("rerank", "value"),
    }
    for report in reports.values():
        assert report.requests == math.ceil(len(points) / 500)
        assert report.expected_points == len(points)

    by_series = {name: part.reset_index(drop=True) for name, part in frame.groupby("series")}
    for name, part in by_series.items():
        # every grid point exactly once: no chunk boundary duplicated or dropped
        assert part["timestamp"].tolist() == [utc(t) for t in points], name

    chat, embed, rerank = by_series["chat"], by_series["embed"], by_series["rerank"]

    # The counter's known rate holds through both restarts.
    assert np.allclose(chat["value"], CHAT_RATE, rtol=1e-9, atol=0)
    assert np.allclose([prometheus_rate(CHAT_COUNTER, t) for t in points], CHAT_RATE)
    reset_windows = [
        t for t in points if any(t - RATE_WINDOW < sample_time(r) <= t for r in CHAT_RESETS)
    ]
    assert len(reset_windows) == 10
    assert reports[("chat", "value")].complete

    want_rerank = [prometheus_rate(RERANK_COUNTER, t) for t in points]
    assert np.allclose(rerank["value"], want_rerank, rtol=1e-9, atol=0)
    assert set(np.round(want_rerank, 9)) >= set(RERANK_RATES), "both regimes are covered"

    # Gauges come back exactly (average of two integer percentages is exact in binary).
    want_gpu = [
        (lookback_value(GPU["chat-0"], t) + lookback_value(GPU["chat-1"], t)) / 2 for t in points
    ]
    assert chat["gpu_util"].tolist() == want_gpu
    assert np.isnan(embed["gpu_util"]).all(), "embed declares no covariate"

    want_embed = np.array([lookback_value(EMBED_QUEUE, t) for t in points])
    got_embed = embed["value"].to_numpy()
    assert np.array_equal(np.isnan(got_embed), np.isnan(want_embed))
    assert got_embed[~np.isnan(want_embed)].tolist() == want_embed[~np.isnan(want_embed)].tolist()

    # The hole is reported, not zero-filled.
    missing_times = points[np.isnan(want_embed)]
    assert len(missing_times) > 0
    (gap,) = reports[("embed", "value")].missing
    assert (gap.start, gap.end, gap.points) == (
        utc(missing_times[0]),
        utc(missing_times[-1]),
        len(missing_times),
    )
    assert [r.workload for r in history_.incomplete] == ["embed"]


def test_default_limit_splits_a_range_prometheus_would_reject(server: PrometheusServer) -> None:
    query = {"embed": QUERIES["embed"]}
    # 12 s never lands exactly 5 minutes after a sample, so the lookback edge is unambiguous.
    points = grid(START, END, 12)
    assert len(points) > 11_000

    with source(server) as src:
        history_ = src.fetch(query, start=utc(START), end=utc(END), step=12)
    (report,) = history_.reports
    assert report.requests == 2
    want = np.array([lookback_value(EMBED_QUEUE, int(t)) for t in points])
    got = history_.frame["value"].to_numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])

    # The same range in one request is refused by the server: chunking is what makes it work.
    with (
        source(server, max_points_per_request=20_000) as src,
        pytest.raises(
            HistoryFetchError,
            match=r"(?s)'embed'.*exceeded maximum resolution.*num_requests_waiting",
        ),
    ):
        src.fetch(query, start=utc(START), end=utc(END), step=12)


def test_range_past_the_data_reports_the_tail_as_missing(server: PrometheusServer) -> None:
    end = T0 + 3 * 86_400
    with source(server, max_points_per_request=500, point_margin=0) as src:
        history_ = src.fetch({"chat": QUERIES["chat"]}, start=utc(START), end=utc(end), step=60)
    (report,) = history_.reports
    points = grid(START, end, 60)
    assert report.requests == math.ceil(len(points) / 500)
    want = np.array([prometheus_rate(CHAT_COUNTER, t) for t in points])
    have = points[~np.isnan(want)]
    # windows reaching past the last sample are extrapolated less and read below the rate
    assert (want[~np.isnan(want)] < CHAT_RATE - 0.1).sum() == 3
    values = history_.frame["value"].to_numpy()
    assert np.array_equal(np.isnan(values), np.isnan(want))
    assert np.allclose(values[: len(have)], want[: len(have)], rtol=1e-9, atol=0)
    (tail,) = report.missing
    assert (tail.start, tail.end) == (utc(have[-1] + 60), utc(end))
    assert report.received_points == len(have)


def test_query_without_series_names_workload_and_query(server: PrometheusServer) -> None:
    query = 'sum(vllm:num_requests_waiting{model_name="no-such-model"})'
    with source(server) as src, pytest.raises(HistoryFetchError) as caught:
        src.fetch({"ghost": query}, start=utc(START), end=utc(END), step=60)
    message = str(caught.value)
    assert "'ghost'" in message
    assert "returned no series" in message
    assert query in message


def test_query_with_several_series_asks_for_aggregation(server: PrometheusServer) -> None:
    with source(server) as src, pytest.raises(HistoryFetchError) as caught:
        src.fetch({"gpu": "DCGM_FI_DEV_GPU_UTIL"}, start=utc(START), end=utc(END), step=60)
    message = str(caught.value)
    assert "'gpu'" in message
    assert "returned 3 series" in message
    assert "sum(" in message
    assert "Query: 'DCGM_FI_DEV_GPU_UTIL'" in message


def test_invalid_promql_is_a_fetch_error_with_the_server_reason(server: PrometheusServer) -> None:
    with (
        source(server, retries=2) as src,
        pytest.raises(
            HistoryFetchError,
            match=r"(?s)'chat'.*HTTP 400: bad_data.*Query: 'sum\(rate\(x\[5m\]\)'",
        ) as caught,
    ):
        src.fetch({"chat": "sum(rate(x[5m])"}, start=utc(START), end=utc(END), step=60)
    assert "attempts" not in str(caught.value), "a bad query is not retried"
