"""``crane-dsp``: Crane's EHPA with its DSP predictor, beside the reactive HPA.

After gocrane/crane ``pkg/prediction/dsp`` (``prediction.go``, ``signal.go``,
``estimators.go``, ``config.go``, ``preprocessing.go``, ``auto_correlation.go``,
``peak.go``), ``pkg/prediction/accuracy/accuracy.go`` and the prediction metric of
``pkg/metricprovider/external_metric_provider.go``. Every model update (12 h, craned's
``--model-update-interval`` default) Crane:

1. takes the metric's history, 15 days and an hour at the data resolution (the DSP
   defaults), trimmed to whole hours, with values above its 99.9th or below its 0.1th
   percentile replaced by the value before them;
2. looks for the period: on the last whole weeks if there are at least two of them, else on
   the last whole days if there are at least two; the period search keeps the FFT bins
   stronger than the 99th percentile of the strongest bin of 100 shuffles of the series,
   and of their periods picks the one that is a peak of the autocorrelation with the
   highest value; only a period of exactly a day or a week counts;
3. with a period and at least two cycles of it, picks the best of its eight default FFT
   estimators (low-pass filters of the spectrum keeping at least 3 or 50 components, with
   margins of 1 to 20 %) by their error on the last cycle when fitted on the cycles before
   (MAPE with under-prediction amplified, or MAE when the series touches zero), and predicts
   by repeating the chosen estimator's last cycle;
4. without a period, predicts nothing: the EHPA's prediction metric has no value and the HPA
   runs on the demand alone.

The prediction metric at time ``t`` is the largest predicted value in ``[t, t + window]``
(``predictionWindowSeconds``, an hour), published beside the demand metric with the same
target (EHPA copies the metric's target), so the HPA takes the larger proposal. Crane's
adapter truncates the value to an integer; the trace units here are arbitrary, so it is
published unrounded. The period search shuffles with a fixed seed where Crane seeds from the
clock. ``margin`` scales the chosen estimate, as an ``FFTEstimators`` entry's
``marginFraction`` does.

Everything above runs once per model update, not per decision; the updates depend on the
history only, so one set serves every setting of a sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.memo import memoized
from forecaster.policies.reach import BESIDE, rungs
from forecaster.policies.reactive import ReactivePolicy, beside_reactive_path
from forecaster.workload import WorkloadSpec

HOUR = 3600.0
DAY = 86400.0
WEEK = 7 * DAY
# Margins over the chosen estimate; 10 x 3 x 2 = 60 settings.
MARGIN_GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.8)
SHUFFLES = 100
AUTOCORRELATION_SEARCH = 4 * HOUR  # MaxAutoCorrelationPeakSearchIntervalSeconds
MIN_VALUE = 0.01  # defaultFFTMinValue: a non-positive estimate is published as this


@dataclass(frozen=True)
class FFTEstimator:
    """One of Crane's ``fftEstimator`` settings (``estimators.go``)."""

    min_items: int
    low_amplitude: float
    margin: float
    max_items: int = 100
    high_frequency: float = 1.0 / HOUR

    def estimate(self, samples: np.ndarray, rate: float, per_period: int) -> np.ndarray:
        """The last ``per_period`` samples of the series low-pass filtered in frequency."""
        n = len(samples)
        spectrum = np.fft.fft(samples)
        amplitude = np.abs(spectrum) / n
        ranked = np.sort(amplitude[1 : n // 2])[::-1]
        floor = ranked[min(self.max_items, len(ranked)) - 1]
        floor = max(floor, self.low_amplitude)
        if len(ranked) >= self.min_items:
            floor = min(floor, ranked[self.min_items - 1])
        frequency = np.arange(n) * rate / n
        spectrum[(amplitude < floor) & (frequency > self.high_frequency)] = 0
        tail = np.fft.ifft(spectrum).real[n - per_period :]
        return np.where(tail <= 0, MIN_VALUE, tail) * (1 + self.margin)


DEFAULT_ESTIMATORS = tuple(
    FFTEstimator(items, low, margin)
    for items, low in ((3, 1.0), (50, 0.05))
    for margin in (0.01, 0.10, 0.15, 0.20)
)


class CraneDSPPolicy(ReactivePolicy):
    """HPA on the demand and on the max of Crane's DSP prediction over the next hour.

    Parameters
    ----------
    margin
        Fraction added to the chosen estimate.
    periods
        The periods Crane accepts, longest first (a week, then a day).
    history
        Seconds of history each model update reads.
    update_interval
        Seconds between model updates.
    window
        ``predictionWindowSeconds``: the metric is the largest prediction this far ahead.
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of both metrics and of the HPA (see :class:`ReactivePolicy`).
    """

    knob: ClassVar[str | None] = "margin"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        margin: float = 0.0,
        periods: tuple[float, ...] = (WEEK, DAY),
        history: float = 15 * DAY + HOUR,
        update_interval: float = 12 * HOUR,
        window: float = HOUR,
        target_utilization: float | None = None,
        scrape_interval: float = 30.0,
        rate_window: float = 60.0,
        behavior: HPABehavior | None = None,
        tolerance: float | None = None,
        scrape_phase: float = 0.0,
    ) -> None:
        super().__init__(
            target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        )
        self.margin = margin
        self.periods = tuple(periods)
        self.history = history
        self.update_interval = update_interval
        self.window = window

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """The margin crossed with the (shared) target utilization and the tolerance, and
        the rungs of :mod:`forecaster.policies.reach` (margin ``1/u - 1``)."""
        fine = beside_reactive_path("margin", MARGIN_GRID)
        return fine + rungs(lambda u: {"margin": round(1 / u - 1, 6)} | BESIDE)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas of the EHPA's HPA; the plain HPA when no update found a period."""
        updates = self.updates(obs)
        if all(cycle is None for _, cycle in updates):
            return self.plan_with(obs, [])
        metric = (1 + self.margin) * self.metric_at(obs, self.ticks(obs))
        return self.plan_with(obs, [(metric, self.demand_target(obs.spec))])

    def updates(self, obs: Observation) -> list[tuple[int, np.ndarray | None]]:
        """Per model update, the first cell it had not observed and its predicted cycle
        (``None`` when it predicted nothing); the prediction of cell ``begin + i`` is
        ``cycle[i % len(cycle)]``."""
        key = ("crane-dsp", self.periods, self.history, self.update_interval)
        return memoized(obs, key, lambda: self._fit(obs))

    def _fit(self, obs: Observation) -> list[tuple[int, np.ndarray | None]]:
        step = obs.data_step
        cells = round(self.history / step)
        begins = np.floor(obs.step_times(self.update_interval) / step + 1e-9).astype(int)
        return [(int(b), self._cycle(obs.demand[max(0, b - cells) : b], step)) for b in begins]

    def metric_at(self, obs: Observation, times: np.ndarray) -> np.ndarray:
        """The prediction metric at ``times``: the largest prediction of the update in force
        for the cells starting in ``[t, t + window]``; 0 while that update predicted nothing."""
        step = obs.data_step
        updates = self.updates(obs)
        made = np.searchsorted(obs.step_times(self.update_interval), times, side="right") - 1
        first = np.ceil(times / step - 1e-9).astype(int)
        width = int(np.floor(self.window / step + 1e-9)) + 1
        offsets = np.arange(width)
        last = np.floor((times + self.window) / step + 1e-9).astype(int)
        out = np.zeros(len(times))
        for index, (begin, cycle) in enumerate(updates):
            rows = np.flatnonzero(made == index)
            if cycle is None or not len(rows):
                continue
            cell = first[rows, None] + offsets[None, :]
            values = np.where(cell <= last[rows, None], cycle[(cell - begin) % len(cycle)], 0)
            out[rows] = values.max(axis=1)
        return out

    def _cycle(self, history: np.ndarray, step: float) -> np.ndarray | None:
        """One predicted cycle starting right after ``history``, or ``None``."""
        series = _preprocess(history, max(1, round(HOUR / step)))
        period = self._period(series, step)
        if period is None:
            return None
        per_period = round(period / step)
        cycles = len(series) // per_period
        if cycles < 2:
            return None
        signal = series[len(series) - cycles * per_period :]
        fitted, actual = signal[:-per_period], signal[-per_period:]
        errors = [
            _prediction_error(actual, e.estimate(fitted, 1 / step, per_period))
            for e in DEFAULT_ESTIMATORS
        ]
        best = DEFAULT_ESTIMATORS[int(np.argmin(errors))]
        return best.estimate(signal, 1 / step, per_period)

    def _period(self, series: np.ndarray, step: float) -> float | None:
        """The first of ``periods`` with two whole cycles in ``series`` decides the search;
        its result counts only when it is one of ``periods``."""
        for period in self.periods:
            per_period = round(period / step)
            cycles = len(series) // per_period
            if cycles > 1:
                found = _find_period(series[len(series) - cycles * per_period :], step)
                return found if any(math.isclose(found, p) for p in self.periods) else None
        return None


def _preprocess(values: np.ndarray, per_hour: int) -> np.ndarray:
    """Whole hours from the end; extreme values replaced by the value before them."""
    values = values[len(values) % per_hour :]
    if len(values) < 2:
        return values
    high, low = np.percentile(values, 99.9), np.percentile(values, 0.1)
    extreme = (values > high) | (values < low)
    extreme[0] = False
    # each extreme value takes the last non-extreme value before it
    keep = np.where(~extreme, np.arange(len(values)), 0)
    out: np.ndarray = values[np.maximum.accumulate(keep)]
    return out


def _find_period(samples: np.ndarray, step: float) -> float:
    """Crane's ``Signal.FindPeriod``: the period in seconds, or -1."""
    n = len(samples)
    rng = np.random.default_rng(0)
    shuffled = rng.permuted(np.broadcast_to(samples, (SHUFFLES, n)), axis=1)
    strongest = np.abs(np.fft.rfft(shuffled, axis=1)[:, 1 : n // 2]).max(axis=1)
    threshold = np.sort(strongest)[SHUFFLES - 2]
    power = np.abs(np.fft.rfft(samples))
    hints: list[int] = []
    for k in range(2, n // 2):
        if power[k] > threshold and (not hints or hints[-1] > n // k):
            hints.append(n // k)
    if not hints:
        return -1.0
    correlation = _autocorrelation(samples)
    reach = int(AUTOCORRELATION_SEARCH / step)
    best, chosen = 0.0, -1
    for hint in hints:
        if _is_peak(correlation, hint, min(reach, hint // 2)) and correlation[hint] > best:
            best, chosen = correlation[hint], hint
    return float(math.floor(chosen * step)) if chosen >= 0 else -1.0


def _autocorrelation(samples: np.ndarray) -> np.ndarray:
    """Circular autocorrelation of the standardized series (no zero padding, as Crane)."""
    x = (samples - samples.mean()) / samples.std()
    power = np.abs(np.fft.fft(x)) ** 2
    result: np.ndarray = np.fft.ifft(power).real / len(x)
    return result


def _is_peak(x: np.ndarray, i: int, k: int) -> bool:
    """Least-squares slope rising over ``[i - k, i]`` and falling over ``[i, i + k]``."""
    n = len(x)
    if i < 1 or i > n - 1:
        return False
    # written as Crane's rejections, so a NaN slope (one point) passes as it does there
    rising = not _slope(x[max(0, i - k) : i + 1]) <= 0
    return rising and not _slope(x[i : min(n - 1, i + k) + 1]) >= 0


def _slope(y: np.ndarray) -> float:
    """Least-squares slope of ``y`` against its index; NaN for a single point (Crane's 0/0)."""
    if len(y) < 2:
        return math.nan
    j = np.arange(len(y), dtype=float)
    return float(((j - j.mean()) * (y - y.mean())).sum() / ((j - j.mean()) ** 2).sum())


def _prediction_error(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Crane's ``PredictionError``: MAPE with under-prediction amplified, else MAE."""
    if (actual < 1e-3).any():
        return float(np.abs(actual - predicted).mean())
    relative = (actual - predicted) / actual
    under = -np.log(1 - np.clip(relative, None, 1 - 1e-12)) / math.log(1.25)
    return float(np.where(predicted < actual, under, -relative).mean())
