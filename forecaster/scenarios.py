"""Seeded synthetic GPU-inference demand for tests, benchmarks and the demo.

Demand is a request rate in requests per second. A scenario multiplies a daily cycle (quiet
nights, a busy afternoon), a weekly cycle (quieter weekends) and a trend, adds short bursts,
optionally a *viral ramp* (a 100x rise within an hour that then decays to a higher plateau),
draws arrivals as Poisson counts per step (with extra-Poisson noise) and optionally drops an
outage window of data. GPU utilization is derived from demand and the replicas a lagging
autoscaler would have run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from forecaster.exceptions import ConfigError

START = pd.Timestamp("2026-01-05 00:00", tz="UTC")  # a Monday


def gpu_inference_demand(
    days: int = 21,
    step: int = 60,
    seed: int = 0,
    *,
    base_rate: float = 20.0,
    daily_amplitude: float = 0.6,
    weekend_dip: float = 0.35,
    trend_per_week: float = 0.03,
    noise: float = 0.1,
    bursts_per_day: float = 1.5,
    viral_day: float | None = None,
    viral_factor: float = 100.0,
    outage_day: float | None = None,
    outage_hours: float = 3.0,
    working_hours: tuple[float, float] | None = None,
    after_hours: float = 1.0,
    series: str = "gpu-inference",
    start: pd.Timestamp = START,
) -> pd.DataFrame:
    """Synthetic demand as a long frame (``series``, ``timestamp``, ``value``).

    Parameters
    ----------
    days, step
        Span in days and grid step in seconds.
    seed
        Seed of every random draw: the same arguments give the same frame.
    base_rate
        Mean request rate (requests/s) before the trend and the viral ramp.
    daily_amplitude, weekend_dip, trend_per_week
        Relative size of the daily swing, the weekend reduction and the weekly growth.
    noise
        Extra-Poisson multiplicative noise (log-normal sigma).
    bursts_per_day
        Mean number of short bursts (2-6x for 5-20 minutes) per day.
    viral_day
        Day (fractional) at which demand rises ``viral_factor``-fold within an hour, then decays
        over a day to a third of the peak. None for no ramp.
    outage_day, outage_hours
        Start (fractional day) and length of a window with no data. None for no outage.
    working_hours, after_hours
        Hours of the day ``[begin, end)`` of weekdays when the service is used; outside them
        the rate is multiplied by ``after_hours``. None for every hour.
    series
        Series id.
    start
        First timestamp (UTC).
    """
    if days <= 0 or step <= 0:
        raise ConfigError(f"`days` and `step` must be positive, got days={days!r}, step={step!r}")
    rng = np.random.default_rng(seed)
    t = np.arange(0, days * 86400, step, dtype=float)
    day_fraction = (t % 86400) / 86400
    # Peak mid-afternoon, trough before dawn.
    daily = 1 + daily_amplitude * np.sin(2 * np.pi * (day_fraction - 0.375))
    weekday = ((t // 86400) + start.dayofweek) % 7
    weekly = np.where(weekday >= 5, 1 - weekend_dip, 1.0)
    trend = (1 + trend_per_week) ** (t / (7 * 86400))
    rate = base_rate * daily * weekly * trend
    # The bursts are the generator's first draws, so burst_factor can replay them alone.
    rate *= _bursts(t, days, bursts_per_day, rng)
    if viral_day is not None:
        rate *= _viral(t, viral_day * 86400, viral_factor)
    if working_hours is not None:
        hour = day_fraction * 24
        working = (hour >= working_hours[0]) & (hour < working_hours[1]) & (weekday < 5)
        rate *= np.where(working, 1.0, after_hours)
    counts = rng.poisson(rate * step * rng.lognormal(-(noise**2) / 2, noise, len(t)))
    frame = pd.DataFrame(
        {
            "series": series,
            "timestamp": start + pd.to_timedelta(t, unit="s"),
            "value": counts / step,
        }
    )
    if outage_day is not None:
        lost = (t >= outage_day * 86400) & (t < outage_day * 86400 + outage_hours * 3600)
        frame = frame[~lost].reset_index(drop=True)
    return frame


def burst_factor(
    days: int = 21, step: int = 60, seed: int = 0, bursts_per_day: float = 1.5
) -> np.ndarray:
    """The factor the bursts multiplied the rate by in :func:`gpu_inference_demand` with the
    same arguments, one value per grid step from ``start`` (1 outside the bursts).

    Dividing a scenario's demand by it takes the bursts out of that very draw: what a
    forecaster that foresaw everything but the bursts would have known
    (``benchmarks/burst_headroom.py``).
    """
    t = np.arange(0, days * 86400, step, dtype=float)
    return _bursts(t, days, bursts_per_day, np.random.default_rng(seed))


def _bursts(t: np.ndarray, days: int, per_day: float, rng: np.random.Generator) -> np.ndarray:
    factor = np.ones_like(t)
    for _ in range(rng.poisson(per_day * days)):
        begin = rng.uniform(0, t[-1])
        length = rng.uniform(300, 1200)
        factor[(t >= begin) & (t < begin + length)] *= rng.uniform(2, 6)
    return factor


def _viral(t: np.ndarray, begin: float, factor: float) -> np.ndarray:
    ramp = np.clip((t - begin) / 3600, 0, 1)  # full rise within one hour
    decay = np.exp(-np.clip(t - begin - 3600, 0, None) / 86400)
    plateau = 1 + (factor - 1) * (1 / 3 + (2 / 3) * decay)
    return 1 + (plateau - 1) * ramp


def gpu_utilization(
    demand: np.ndarray,
    capacity_per_replica: float,
    *,
    target_utilization: float = 0.7,
    lag_steps: int = 5,
    min_replicas: int = 1,
    seed: int = 0,
) -> np.ndarray:
    """GPU utilization (percent) of replicas sized by a lagging autoscaler for ``demand``.

    Replicas follow ``ceil(demand / (capacity * target))`` seen ``lag_steps`` cells late; the
    utilization is served demand over capacity, with a little measurement noise, in [0, 100].
    """
    if capacity_per_replica <= 0:
        raise ConfigError(f"`capacity_per_replica` must be positive, got {capacity_per_replica!r}")
    demand = np.nan_to_num(np.asarray(demand, dtype=float))
    lagged = np.concatenate([np.full(lag_steps, demand[0]), demand])[: len(demand)]
    replicas = np.maximum(
        np.ceil(lagged / (capacity_per_replica * target_utilization)), min_replicas
    )
    busy = np.minimum(demand / (replicas * capacity_per_replica), 1.0)
    noisy = busy + np.random.default_rng(seed).normal(0, 0.01, len(busy))
    return np.clip(noisy, 0.0, 1.0) * 100


def steady_diurnal(days: int = 21, step: int = 60, seed: int = 0) -> pd.DataFrame:
    """A busy chat model: daily and weekly cycles, growth, noise and bursts."""
    return gpu_inference_demand(days, step, seed, series="steady-diurnal")


def viral_launch(days: int = 21, step: int = 60, seed: int = 0) -> pd.DataFrame:
    """A small model that goes viral: ~100 requests/hour rising to ~10,000 within an hour
    two thirds of the way through, and an outage of the metrics pipeline before that."""
    return gpu_inference_demand(
        days,
        step,
        seed,
        base_rate=100 / 3600,
        viral_day=days * 2 / 3 + 0.55,
        outage_day=days / 3 + 0.2,
        series="viral-launch",
    )


def office_hours(days: int = 21, step: int = 60, seed: int = 0) -> pd.DataFrame:
    """A sparse internal model: used on weekdays from 08:00 to 19:00 UTC (~0.1 requests/s,
    with bursts), idle at night and on weekends but for a rare late request."""
    return gpu_inference_demand(
        days,
        step,
        seed,
        base_rate=0.1,
        working_hours=(8.0, 19.0),
        after_hours=0.002,
        series="office-hours",
    )


SCENARIOS: dict[str, Callable[[int, int, int], pd.DataFrame]] = {
    "steady-diurnal": steady_diurnal,
    "viral-launch": viral_launch,
    "office-hours": office_hours,
}
