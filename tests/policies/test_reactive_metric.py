"""The reactive HPA's demand metric is Prometheus' ``rate()`` over a scraped counter.

The reference below follows ``extrapolatedRate`` of Prometheus 3 (``promql/functions.go``):
the samples of ``(t - window, t]``, their increase, extrapolated toward the window's edges
(fully when the gap is under 1.1 average sample intervals, else by half an interval, and
never below the counter's zero), divided by the window.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.exceptions import ConfigError
from forecaster.policies import Observation
from forecaster.policies.reactive import ReactivePolicy
from forecaster.workload import WorkloadSpec

DATA_STEP = 60.0
# A counter that has been counting for a while: extrapolation never reaches its zero.
COUNTER_START = 1e5


def counter(demand: np.ndarray, at: float) -> float:
    """Work counted up to ``at``: the demand is held over each data step."""
    edges = np.arange(len(demand) + 1) * DATA_STEP
    counted = np.concatenate([[0.0], np.cumsum(demand * DATA_STEP)])
    return COUNTER_START + float(np.interp(at, edges, counted))


def prometheus_rate(
    demand: np.ndarray, t: float, window: float, interval: float, phase: float
) -> float:
    scrapes = phase + interval * np.arange(int(t // interval) + 2)
    samples = [(s, counter(demand, s)) for s in scrapes if t - window < s <= t]
    (first_t, first_v), (last_t, last_v) = samples[0], samples[-1]
    increase = last_v - first_v
    sampled = last_t - first_t
    average = sampled / (len(samples) - 1)
    to_start, to_end = first_t - (t - window), t - last_t
    if to_start >= 1.1 * average:
        to_start = average / 2
    if increase > 0:
        to_start = min(to_start, sampled * first_v / increase)
    if to_end >= 1.1 * average:
        to_end = average / 2
    return increase * (sampled + to_start + to_end) / sampled / window


@settings(max_examples=60, deadline=None)
@given(
    demand=st.lists(st.floats(0.0, 100.0), min_size=12, max_size=12),
    interval=st.sampled_from([10.0, 15.0, 30.0, 60.0]),
    scrapes=st.sampled_from([2.0, 2.5, 3.0, 4.0]),
    # Prometheus keeps milliseconds
    phase_share=st.integers(0, 999),
    times_ms=st.lists(st.integers(300_000, 660_000), min_size=1, max_size=20),
)
def test_metric_is_prometheus_rate(
    demand: list[float],
    interval: float,
    scrapes: float,
    phase_share: int,
    times_ms: list[int],
) -> None:
    values = np.array(demand)
    window, phase = scrapes * interval, phase_share * interval / 1000
    times = [t / 1000 for t in times_ms]
    obs = Observation(values, DATA_STEP, 1, WorkloadSpec(capacity_per_replica=1.0))
    policy = ReactivePolicy(scrape_interval=interval, rate_window=window, scrape_phase=phase)
    metric = policy.metric(obs, np.array(times))
    expected = [prometheus_rate(values, t, window, interval, phase) for t in times]
    assert metric.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_default_metric_is_the_30_s_before_the_newest_scrape() -> None:
    # demand 0 then 60 from t = 60 s; scrapes every 30 s at 10, 40, 70, ...
    obs = Observation(np.array([0.0, 60.0, 60.0]), DATA_STEP, 1, WorkloadSpec(1.0))
    metric = ReactivePolicy(scrape_phase=10.0).metric(obs, np.array([69.0, 70.0, 99.0, 100.0]))
    # at 69 s the samples are at 10 and 40 (no demand yet); from 70 s, 40 and 70: 10 s of
    # the 30 s at 60; from 100 s, 70 and 100: all of it
    assert metric.tolist() == pytest.approx([0.0, 20.0, 20.0, 60.0])


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"rate_window": 45.0}, id="window-under-two-scrapes"),
        pytest.param({"scrape_phase": 30.0}, id="phase-a-whole-interval"),
        pytest.param({"scrape_interval": 0.0}, id="no-interval"),
    ],
)
def test_a_window_without_two_samples_is_refused(params: dict[str, float]) -> None:
    obs = Observation(np.ones(3), DATA_STEP, 1, WorkloadSpec(1.0))
    with pytest.raises(ConfigError, match="rate_window"):
        ReactivePolicy(**params).metric(obs, np.array([120.0]))
