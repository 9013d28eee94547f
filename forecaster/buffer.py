"""The warm buffer: spare warm replicas for the demand increase no forecast foresees.

A burst that comes from nowhere is invisible to a forecast, but the size of the increases a
workload sees over its lead time has a distribution, and bursts ride on the daily pattern.
The buffer is the ``q``-quantile of the **increase** over the lead window: the largest demand
of ``[t + L, t + L + hold]`` minus the demand ``d`` at the origin ``t``. Kept warm on top of
``d``, it covers an increase of that size whenever it comes.

Increases are learned relative to ``max(d, level)``, ``level`` being the mean demand of the
training window: a busy workload's increases grow with its demand (a ramp that doubles every
few minutes needs a buffer that doubles too), while the level keeps a quiet or idle origin
from dividing by a near-zero demand, so there the buffer is an absolute one. The buffer path
asks for ``d + ratio * max(d, level)``.

The ratio's quantile is learned by the split-conformal rule the forecasts are calibrated with
(:class:`forecaster.calibration.ConformalCalibrator`, taking the next order statistic up),
per hour of the day (UTC, of the origin) where an hour holds enough increases to resolve
``q`` and pooled over all hours where it does not. Learned on a training window, it is part
of the workload's registered policy (:attr:`forecaster.workload.WorkloadPolicy.buffer` and
``buffer_level``), so serving publishes the buffer that was backtested; the backtest learns
it walk-forward, at each retrain from the increases fully observed before it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from forecaster.calibration import ConformalCalibrator
from forecaster.exceptions import ConfigError, NotEnoughHistoryError
from forecaster.features import MIN_SCALE
from forecaster.workload import WorkloadPolicy

HOURS = 24
# Fewest increases an hour needs for its own quantile, below which its quantile would be the
# hour's maximum or noise: the calibrator's floor, or enough for 1 - q of them to lie above.
MIN_PER_HOUR = 30


def window_increase(values: np.ndarray, first: int, last: int) -> np.ndarray:
    """Per origin ``j``: ``max(values[j + first .. j + last]) - values[j]``.

    NaN where the window runs past the data or the origin is missing.

    Examples
    --------
    >>> window_increase(np.array([1.0, 3.0, 2.0, 5.0]), 1, 2).tolist()
    [2.0, 2.0, nan, nan]
    """
    if not 1 <= first <= last:
        raise ConfigError(f"the lead window must be 1 <= first <= last, got {first}..{last}")
    n = len(values)
    out = np.full(n, np.nan)
    width = last - first + 1
    if n <= last:
        return out
    windows = np.lib.stride_tricks.sliding_window_view(values[first:], width)
    out[: n - last] = windows[: n - last].max(axis=1) - values[: n - last]
    return out


def hour_of_day(index: np.ndarray, step: float, day_offset: float) -> np.ndarray:
    """UTC hour of data cells ``index``, the first cell starting ``day_offset`` seconds after
    midnight."""
    seconds = (day_offset + np.asarray(index) * step) % 86400.0
    hours: np.ndarray = np.floor(seconds / 3600.0 + 1e-9).astype(int) % HOURS
    return hours


def min_per_hour(quantile: float) -> int:
    """Increases an hour needs for its own ``quantile``: at least one above it on average.

    >>> min_per_hour(0.9), min_per_hour(0.99)
    (30, 100)
    """
    return max(MIN_PER_HOUR, math.ceil(1.0 / (1.0 - quantile) - 1e-9))


def training_level(values: np.ndarray) -> float:
    """The buffer's level: the mean demand of the training window, floored where the
    model's scale is (an idle window must not give a level of 0)."""
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    mean = float(finite.mean()) if len(finite) else 0.0
    return max(mean, MIN_SCALE)


def relative_increase(values: np.ndarray, first: int, last: int, level: float) -> np.ndarray:
    """:func:`window_increase` over ``max(values, level)``: the ratio the buffer learns.

    >>> relative_increase(np.array([1.0, 4.0, 2.0, 8.0]), 1, 2, 2.0).tolist()
    [1.5, 1.0, nan, nan]
    """
    if not (math.isfinite(level) and level > 0):
        raise ConfigError(f"the warm buffer's level must be finite and > 0, got {level!r}")
    ratio: np.ndarray = window_increase(values, first, last) / np.fmax(values, level)
    return ratio


def learn_buffer(ratios: np.ndarray, hours: np.ndarray, quantile: float) -> tuple[float, ...]:
    """The ``quantile`` of ``ratios`` per hour of the day: 24 ratios, an hour with too few
    increases taking the pooled one; never below 0 (a buffer adds replicas only).

    Parameters
    ----------
    ratios
        Relative increases over the lead window (:func:`relative_increase`; NaN = not
        observed, skipped).
    hours
        UTC hour (0-23) of each increase's origin.
    quantile
        Level ``q`` in (0, 1).

    Raises
    ------
    NotEnoughHistoryError
        Fewer than ``2 * MIN_PER_HOUR`` observed increases.
    """
    if not 0 < quantile < 1:
        raise ConfigError(f"`buffer_quantile` must be in (0, 1), got {quantile!r}")
    observed = np.isfinite(ratios)
    if observed.sum() < 2 * MIN_PER_HOUR:
        raise NotEnoughHistoryError(
            f"the warm buffer needs at least {2 * MIN_PER_HOUR} observed increases over the "
            f"lead window, got {int(observed.sum())}"
        )
    # An hour holds about 1/24 of the increases: a window too short for an hour of its own
    # (fewer than twice the hour's minimum in all) is pooled, as the calibrator's floor wants.
    needed = min(min_per_hour(quantile), int(observed.sum()) // 2)
    calibrator = ConformalCalibrator((quantile,), min_samples=needed)
    # The buffer is the offset that makes "no increase" cover the window's maximum.
    zero = np.zeros((len(ratios), 1))
    calibrator.fit(ratios, zero, np.asarray(hours))
    table = calibrator.transform(np.zeros((HOURS, 1)), np.arange(HOURS))[:, 0]
    return tuple(float(v) for v in np.maximum(table, 0.0))


def fit_buffer(
    values: np.ndarray, hours: np.ndarray, first: int, last: int, quantile: float
) -> tuple[tuple[float, ...], float]:
    """The warm buffer learned on a training window: ``(24 hourly ratios, level)``.

    Parameters
    ----------
    values
        Demand per data step over the training window (NaN = missing).
    hours
        UTC hour of each step (:func:`hour_of_day`).
    first, last
        The lead window's horizons, in data steps; origins whose window runs past the
        training window are not learned from.
    quantile
        The buffer's quantile.
    """
    level = training_level(values)
    return learn_buffer(relative_increase(values, first, last, level), hours, quantile), level


def learned(
    policy: WorkloadPolicy, values: np.ndarray, step: float, day_offset: float
) -> WorkloadPolicy:
    """``policy`` with its warm buffer learned on ``values`` (its training window, the first
    step starting ``day_offset`` seconds after UTC midnight); unchanged without a buffer."""
    if policy.buffer_quantile <= 0:
        return policy
    first, last = policy.horizon_range(step)
    hours = hour_of_day(np.arange(len(values)), step, day_offset)
    ratios, level = fit_buffer(values, hours, first, last, policy.buffer_quantile)
    return replace(policy, buffer=ratios, buffer_level=level)


def buffer_rate(
    demand: np.ndarray, ratio: np.ndarray | float, level: np.ndarray | float
) -> np.ndarray:
    """Demand the buffer path sizes for: ``d + ratio * max(d, level)`` per origin, ``ratio``
    being the buffer of the origin's hour.

    >>> buffer_rate(np.array([0.0, 1.0, 4.0]), 0.5, 2.0).tolist()
    [1.0, 2.0, 6.0]
    """
    demand = np.asarray(demand, dtype=float)
    rate: np.ndarray = demand + np.asarray(ratio) * np.fmax(demand, level)
    return rate
