"""``hybrid``: prewarm's recommendation, the HPA reading both the forecast and the demand."""

from __future__ import annotations

import itertools
from typing import ClassVar

import numpy as np

from forecaster.activation import ACTIVATION_GRID, activation_quantile, is_active
from forecaster.policies.base import Grid, Observation
from forecaster.policies.buffered import BUFFER_GRID, buffer_path
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.predictive import QUANTILE_GRID, PredictivePolicy
from forecaster.policies.reach import BESIDE, hpa_rungs, rungs
from forecaster.policies.reactive import (
    REACTIVE_PATH_GRID,
    TOLERANCE_GRID,
    Activity,
    ReactivePolicy,
)
from forecaster.workload import WorkloadSpec

# Past the top quantile, the two ways to more margin, each tried with the reactive path's
# settings: a forecast path at a lower utilization, and the warm buffer's top quantile.
TAIL_UTILIZATION = (0.8,)
TAIL_BUFFER = (BUFFER_GRID[-1],)
# Every setting names its buffer, so a tuned setting without one replaces a configured one.
NO_BUFFER = {"buffer_quantile": 0.0}


class HybridPolicy(ReactivePolicy):
    """``max(predictive, reactive)`` the way Kubernetes computes it.

    The forecast is published as a second External metric beside the demand; the HPA takes
    the larger per-metric proposal, then applies tolerance, stabilization and rate limits.
    The forecast adds capacity early, the reactive path catches what it did not foresee.

    Parameters
    ----------
    quantile, hold
        Of the forecast path (see :class:`PredictivePolicy`).
    forecast_utilization
        ``u`` of the forecast path; ``None`` takes the workload's.
    buffer_quantile, buffer
        The warm buffer beside the forecast (see :class:`BufferedPolicy`): the forecast
        path asks for the larger of the forecast and the buffer path, so the one published
        metric carries both; 0 plans on the forecast alone.
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of the reactive path and of the HPA (see :class:`ReactivePolicy`).
    activation_probability
        With ``min_replicas`` 0, ``p`` of prewarm's push trigger (``StreamIsActive``): KEDA
        wakes the workload when the forecast over the lead window gives ``P(demand > 0) >
        p`` (:mod:`forecaster.activation`); ``None`` takes ``1 - quantile``.
    """

    knob: ClassVar[str | None] = "quantile"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        quantile: float | None = None,
        target_utilization: float | None = None,
        forecast_utilization: float | None = None,
        hold: float = 0.0,
        scrape_interval: float = 30.0,
        rate_window: float = 60.0,
        behavior: HPABehavior | None = None,
        tolerance: float | None = None,
        scrape_phase: float = 0.0,
        buffer_quantile: float = 0.0,
        buffer: tuple[tuple[float, ...], float] | None = None,
        activation_probability: float | None = None,
    ) -> None:
        super().__init__(
            target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        )
        self.quantile = quantile
        self.forecast_utilization = forecast_utilization
        self.hold = hold
        self.buffer_quantile = buffer_quantile
        self.buffer = buffer
        self.activation_probability = activation_probability

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Forecast quantiles crossed with the reactive path's utilization and the tolerance.

        The two paths are searched jointly: a higher quantile lets the reactive path run
        hotter, and the cheapest pair is not the best of each alone. The forecast path runs
        at utilization 1 without a buffer: its quantile already is the margin for forecast
        error, and a second margin on top of it only adds idle replicas, except past the
        top quantile (measured on the bursty traces: ``benchmarks/backtest_savings.py``).

        With ``min_replicas`` 0 the activation probability takes the place of the reactive
        path's utilization (which then runs at 1, catching only demand above the ready
        capacity), so the budget of settings stays the same.
        """
        points = cls._points(spec)
        if spec.min_replicas > 0:
            return points
        # The i-th reactive-path utilization's points try the i-th activation probability;
        # the HPA's rungs keep their margin and wake on the least chance of demand.
        swap = dict(zip(REACTIVE_PATH_GRID, ACTIVATION_GRID, strict=True))
        return tuple(
            p | {"target_utilization": 1.0, "activation_probability": swap[p["target_utilization"]]}
            if p["target_utilization"] in swap
            else p | {"activation_probability": ACTIVATION_GRID[-1]}
            for p in points
        )

    @classmethod
    def _points(cls, spec: WorkloadSpec) -> Grid:
        joint = [
            {"quantile": q, "target_utilization": u, "forecast_utilization": 1.0, "tolerance": t}
            | NO_BUFFER
            for q, u, t in itertools.product(QUANTILE_GRID, REACTIVE_PATH_GRID, TOLERANCE_GRID)
        ]
        # Past the top quantile the frontier still has to reach the SLO on traces whose
        # bursts no quantile foresees: there the forecast path buys margin with utilization
        # (a ramp the forecast sees late), or keeps a warm buffer sized from the increases
        # of the past (bursts that come from nowhere).
        top = {"quantile": QUANTILE_GRID[-1]}
        tail = [
            top | {"target_utilization": u, "forecast_utilization": f, "tolerance": t} | NO_BUFFER
            for f, u, t in itertools.product(TAIL_UTILIZATION, REACTIVE_PATH_GRID, TOLERANCE_GRID)
        ]
        buffered = [
            top
            | {"target_utilization": u, "forecast_utilization": 1.0, "tolerance": t}
            | {"buffer_quantile": b}
            for b, u, t in itertools.product(TAIL_BUFFER, REACTIVE_PATH_GRID, TOLERANCE_GRID)
        ]
        # Past both, the rungs of :mod:`forecaster.policies.reach` on each path: the forecast
        # path's, and the HPA's own beside the forecast path at its least margin.
        reach = rungs(lambda u: top | {"forecast_utilization": u} | BESIDE | NO_BUFFER)
        least = {"quantile": QUANTILE_GRID[0], "forecast_utilization": 1.0} | NO_BUFFER
        return (*joint, *tail, *buffered, *reach, *hpa_rungs(least))

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the two-metric HPA keeps at each simulation step."""
        forecast = PredictivePolicy(self.quantile, self.forecast_utilization, self.hold)
        ticks = self.ticks(obs)
        rate = forecast.rate_at(obs, ticks)
        if self.buffer_quantile > 0:
            buffered = buffer_path(obs, ticks, self.buffer_quantile, self.hold, self.buffer)
            rate = np.maximum(rate, buffered)
        return self.plan_with(obs, [(rate, self.forecast_target(obs.spec))], self._pushed(obs))

    def _pushed(self, obs: Observation) -> Activity:
        """Activity of prewarm's push trigger at given times: the ``1 - p`` quantile of the
        lead window's forecast above 0."""
        p = self.activation_probability
        if p is None:
            p = 1.0 - (self.quantile or obs.spec.tau)
        window = PredictivePolicy(activation_quantile(p), hold=self.hold)
        return lambda times: is_active(window.rate_at(obs, times))

    def forecast_target(self, spec: WorkloadSpec) -> float:
        """``averageValue`` of the forecast-demand metric: demand per replica at the forecast
        path's utilization."""
        return spec.capacity_per_replica * (self.forecast_utilization or spec.target_utilization)
