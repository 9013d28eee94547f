"""``dynamo-planner``: NVIDIA Dynamo's planner, sizing each interval for its predicted load.

After ai-dynamo/dynamo ``components/src/dynamo/planner``: ``defaults.py`` (the adjustment
interval, 180 s, and the load predictor, ``"arima"``, of ``SLAPlannerDefaults``) and
``core/load/predictors.py`` (the load predictors). Every adjustment interval the planner
reads the load of the interval just ended (request rate over the interval), asks the load
predictor for the next interval's load, and sets the replicas that serve that load at the
per-replica throughput its profile gives for the SLA (here ``capacity_per_replica *
target_utilization``), within its replica bounds. It plans one interval ahead and has no
reactive path beside the prediction: ``config/planner_config.py`` turns throughput
(predictive) scaling on and load-based (reactive) scaling off by default, so the replicas it
asks for are the replicas it gets.

The default ARIMA predictor fits pmdarima's ``auto_arima`` once and updates it with each new
point; it predicts the last value while it has fewer than 5 points, the value itself for a
constant series, and, when the order it selects collapses to ``(0, d, 0)``, refits on
``log1p`` of the load. pmdarima is outside the numeric stack this package may import, so
the stand-in here follows the same selection on numpy alone: ``d`` by repeated KPSS tests at
the 5 % level (auto_arima's default test, at most ``d = 2``), then ``(p, q)`` with
``p, q <= 3`` by AIC, each estimated by Hannan-Rissanen regression (a long autoregression
gives the innovations, then least squares on lagged values and innovations) and scored by
the conditional sum of squares of its own one-step errors; orders whose moving-average
part is not invertible are skipped. The model is refitted on the training window at each
retrain of the walk-forward instead of updated by pmdarima's few optimizer steps per point;
between refits its coefficients are fixed and each interval's prediction comes from one
pass of the innovations recursion over the load series, so a plan costs one fit per
training block, not one per decision. The predictor's skip of an idle start (leading
zeros) is left out.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forecaster.exceptions import ConfigError
from forecaster.policies.base import Grid, Observation
from forecaster.policies.memo import memoized
from forecaster.policies.reach import rungs
from forecaster.workload import WorkloadSpec

ADJUSTMENT_INTERVAL = 180.0
MIN_POINTS = 5
MAX_ORDER = 3
MAX_DIFFERENCES = 2
KPSS_CRITICAL = 0.463  # level stationarity, 5 % (Kwiatkowski et al. 1992, table 1)
# The planner's one knob here, the per-replica load it plans for, as finely as every other
# policy's budget of settings: 0.3 to 1 in steps of 0.0125 (57 settings).
UTILIZATION_GRID = tuple(round(0.3 + 0.0125 * i, 4) for i in range(57))


@dataclass(frozen=True)
class ARIMAFit:
    """An ARIMA(p, d, q) with constant, on the load or on its ``log1p`` (``log``)."""

    d: int
    ar: np.ndarray
    ma: np.ndarray
    constant: float
    log: bool

    def one_step(self, y: np.ndarray) -> np.ndarray:
        """``result[i]``: the prediction of ``y[i + 1]`` from ``y[: i + 1]`` (the last one is
        the value after ``y``), with the coefficients fixed; NaN for the first ``d - 1``."""
        x = np.log1p(np.maximum(y, 0.0)) if self.log else y
        z = np.diff(x, self.d)
        predicted_z = _innovations(z, self.ar, self.ma, self.constant)
        # undo the differencing: x_t = z_t + (what the earlier values contribute)
        # full[t] predicts x[t] for t = 0 .. len(y); the first d have no prediction
        full = np.full(len(y) + 1, np.nan)
        full[self.d :] = predicted_z + _integration_base(x, self.d)
        predicted = np.expm1(full[1:]) if self.log else full[1:]
        return np.maximum(predicted, 0.0)


class DynamoPlannerPolicy:
    """Replicas for the load predicted for the next adjustment interval.

    Parameters
    ----------
    target_utilization
        Fraction of a replica's capacity the planner plans for; ``None`` takes the
        workload's.
    interval
        ``adjustment_interval`` in seconds.
    """

    knob: ClassVar[str | None] = "target_utilization"
    uses_future: ClassVar[bool] = False

    def __init__(
        self, target_utilization: float | None = None, interval: float = ADJUSTMENT_INTERVAL
    ) -> None:
        self.target_utilization = target_utilization
        self.interval = interval

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Target utilizations from 0.3 to 1, and the rungs of :mod:`forecaster.policies.reach`."""
        fine = tuple({"target_utilization": u} for u in UTILIZATION_GRID)
        return fine + rungs(lambda u: {"target_utilization": u})

    def plan(self, obs: Observation) -> np.ndarray:
        """The planner's replicas, set every interval and held until the next."""
        load = self.predicted(obs)
        replicas = obs.replicas_for(load, self.target_utilization or obs.spec.target_utilization)
        return obs.hold_to_steps(replicas, self.interval)

    def predicted(self, obs: Observation) -> np.ndarray:
        """At each adjustment time of the evaluation, the load predicted for the interval
        that starts there."""
        if self.interval <= 0:
            raise ConfigError(f"`interval` must be > 0, got {self.interval!r}")
        return memoized(obs, ("dynamo-planner", self.interval), lambda: self._predict(obs))

    def _predict(self, obs: Observation) -> np.ndarray:
        ticks = obs.step_times(self.interval)
        # the same grid of intervals continued back over the history
        back = int(ticks[0] // self.interval) - 1
        times = np.concatenate([ticks[0] - self.interval * np.arange(back, 0, -1), ticks])
        load = obs.mean_rate(times, self.interval)  # load of the interval ending at each time
        every = (obs.retrain_every or len(obs.demand)) * obs.data_step
        window = (obs.train_window or obs.start) * obs.data_step
        out = np.full(len(ticks), np.nan)
        block_of = np.floor((ticks - ticks[0]) / every + 1e-9).astype(int)
        for block in np.unique(block_of):
            fitted_at = ticks[0] + block * every
            seen = np.flatnonzero((times <= fitted_at + 1e-9) & (times >= fitted_at - window))
            rows = np.flatnonzero(block_of == block)
            first, last = seen[0], back + rows[-1]
            # next-interval predictions from the load up to each tick of the block
            out[rows] = _predict_next(load[first : last + 1], load[first : seen[-1] + 1])[
                back + rows - first
            ]
        return out


def _predict_next(series: np.ndarray, train: np.ndarray) -> np.ndarray:
    """``result[i]``: the predictor's next value after ``series[: i + 1]``; fitted on ``train``
    (a prefix of ``series``) with the planner's fallbacks."""
    last_value = series.copy()
    if len(train) < MIN_POINTS:
        return last_value
    if np.all(train == train[0]):
        return np.full(len(series), float(train[0]))
    fit = fit_arima(train)
    if fit is None:
        return last_value
    predicted = fit.one_step(series)
    # where the recursion has no value yet (the first d points), the last value stands in
    return np.where(np.isfinite(predicted), predicted, last_value)


def fit_arima(y: np.ndarray) -> ARIMAFit | None:
    """The auto-ARIMA stand-in on ``y`` (see the module docstring); ``None`` if nothing fits."""
    fit = _select(y, log=False)
    if fit is not None and not fit.ar.any() and not fit.ma.any():
        # the planner's fallback for spiky load: an order collapsing to (0, d, 0)
        refit = _select(np.log1p(np.maximum(y, 0.0)), log=True)
        fit = refit if refit is not None else fit
    return fit


def _select(x: np.ndarray, log: bool) -> ARIMAFit | None:
    d = _differences(x)
    z = np.diff(x, d)
    n = len(z)
    long_order = min(max(2 * MAX_ORDER, int(10 * math.log10(max(n, 10)))), n // 5)
    start = long_order + MAX_ORDER
    if n - start < 4 * MAX_ORDER:
        return None
    innovations = _long_ar_residuals(z, long_order)
    best: tuple[float, ARIMAFit] | None = None
    for p, q in itertools.product(range(MAX_ORDER + 1), repeat=2):
        columns = [np.ones(n - start)]
        columns += [z[start - i : n - i] for i in range(1, p + 1)]
        columns += [innovations[start - j : n - j] for j in range(1, q + 1)]
        design = np.column_stack(columns)
        coefficients, *_ = np.linalg.lstsq(design, z[start:], rcond=None)
        ma = coefficients[1 + p :]
        if np.abs(ma).sum() >= 1.0:
            continue  # not invertible: the recursion would diverge
        ar, constant = coefficients[1 : 1 + p], float(coefficients[0])
        # scored on the recursion's own innovations (conditional sum of squares), which is
        # what the predictions use, not on the regression's proxy innovations
        residual = z[start:] - _innovations(z, ar, ma, constant)[start:n]
        variance = float(np.mean(residual**2))
        aic = (n - start) * math.log(max(variance, 1e-300)) + 2 * (p + q + 2)
        if best is None or aic < best[0]:
            best = (aic, ARIMAFit(d, ar, ma, constant, log))
    return None if best is None else best[1]


def _differences(x: np.ndarray) -> int:
    """auto_arima's ``ndiffs``: difference while KPSS rejects level stationarity."""
    d = 0
    while d < MAX_DIFFERENCES and len(x) > 2 and np.ptp(x) > 0 and _kpss(x) > KPSS_CRITICAL:
        x = np.diff(x)
        d += 1
    return d


def _kpss(x: np.ndarray) -> float:
    """KPSS statistic for level stationarity, Bartlett weights, ``trunc(4 (n/100)^0.25)``
    lags (the short lag rule of R's ``kpss.test`` and pmdarima)."""
    n = len(x)
    e = x - x.mean()
    lags = int(4 * (n / 100) ** 0.25)
    long_run = float(e @ e) / n
    for lag in range(1, min(lags, n - 1) + 1):
        long_run += 2 * (1 - lag / (lags + 1)) * float(e[lag:] @ e[:-lag]) / n
    partial = np.cumsum(e)
    return float(partial @ partial) / (n**2 * long_run) if long_run > 0 else 0.0


def _long_ar_residuals(z: np.ndarray, order: int) -> np.ndarray:
    """Residuals of an AR(``order``) least-squares fit; 0 where it has no value."""
    n = len(z)
    design = np.column_stack(
        [np.ones(n - order)] + [z[order - i : n - i] for i in range(1, order + 1)]
    )
    coefficients, *_ = np.linalg.lstsq(design, z[order:], rcond=None)
    out = np.zeros(n)
    out[order:] = z[order:] - design @ coefficients
    return out


def _innovations(z: np.ndarray, ar: np.ndarray, ma: np.ndarray, constant: float) -> np.ndarray:
    """One-step predictions of ``z[t]`` for ``t = 0 .. len(z)`` from ``z[:t]`` (the last one
    past the end); innovations before the start are 0."""
    p, q, n = len(ar), len(ma), len(z)
    predicted = np.full(n + 1, constant)
    padded = np.concatenate([np.zeros(p), z])
    for i in range(1, p + 1):
        # padded[p - i + t] is z[t - i] (0 before the start)
        predicted += ar[i - 1] * padded[p - i : p - i + n + 1]
    if not q:
        return predicted
    errors = np.zeros(n + q)  # errors[q + t] is the innovation of z[t]
    ar_part = predicted.tolist()
    theta = ma.tolist()
    values = z.tolist()
    out = np.empty(n + 1)
    for t in range(n + 1):
        guess = ar_part[t] + sum(theta[j] * errors[q + t - 1 - j] for j in range(q))
        out[t] = guess
        if t < n:
            errors[q + t] = values[t] - guess
    return out


def _integration_base(x: np.ndarray, d: int) -> np.ndarray:
    """What earlier values add to a predicted ``d``-th difference to give ``x[t]``, for
    ``t = d .. len(x)``."""
    if d == 0:
        return np.zeros(len(x) + 1)
    if d == 1:  # x[t] = z[t - 1] + x[t - 1]
        return x
    # d == 2: x[t] = z[t - 2] + 2 x[t - 1] - x[t - 2]
    base: np.ndarray = 2 * x[1:] - x[:-1]
    return base
