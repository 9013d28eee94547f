"""``hybrid``: prewarm's recommendation, the HPA reading both the forecast and the demand."""

from __future__ import annotations

import itertools
from typing import ClassVar

import numpy as np

from forecaster.activation import ACTIVATION_GRID, activation_quantile, is_active
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.predictive import QUANTILE_GRID, PredictivePolicy
from forecaster.policies.reactive import (
    REACTIVE_PATH_GRID,
    TOLERANCE_GRID,
    Activity,
    ReactivePolicy,
)
from forecaster.workload import WorkloadSpec

# Forecast-path utilizations tried at the top quantile only (margin beyond the forecast).
TAIL_UTILIZATION = (0.8, 0.6)


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
        activation_probability: float | None = None,
    ) -> None:
        super().__init__(
            target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        )
        self.quantile = quantile
        self.forecast_utilization = forecast_utilization
        self.hold = hold
        self.activation_probability = activation_probability

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Forecast quantiles crossed with the reactive path's utilization and the tolerance.

        The two paths are searched jointly: a higher quantile lets the reactive path run
        hotter, and the cheapest pair is not the best of each alone. The forecast path runs
        at utilization 1: its quantile already is the margin for forecast error, and a
        second margin on top of it only adds idle replicas, except past the top quantile.

        With ``min_replicas`` 0 the activation probability takes the place of the reactive
        path's utilization (which then runs at 1, catching only demand above the ready
        capacity), so the budget of settings stays the same.
        """
        points = cls._points(spec)
        if spec.min_replicas > 0:
            return points
        # The i-th reactive-path utilization's points try the i-th activation probability.
        swap = dict(zip(REACTIVE_PATH_GRID, ACTIVATION_GRID, strict=True))
        return tuple(
            p | {"target_utilization": 1.0, "activation_probability": swap[p["target_utilization"]]}
            for p in points
        )

    @classmethod
    def _points(cls, spec: WorkloadSpec) -> Grid:
        joint = [
            {"quantile": q, "target_utilization": u, "forecast_utilization": 1.0, "tolerance": t}
            for q, u, t in itertools.product(QUANTILE_GRID, REACTIVE_PATH_GRID, TOLERANCE_GRID)
        ]
        # Past the top quantile the frontier still has to reach the SLO on traces whose
        # bursts no quantile foresees: there the forecast path buys margin with utilization.
        tail = [
            {"quantile": QUANTILE_GRID[-1], "target_utilization": u, "forecast_utilization": f}
            | {"tolerance": t}
            for f, u, t in itertools.product(TAIL_UTILIZATION, REACTIVE_PATH_GRID, TOLERANCE_GRID)
        ]
        return tuple(joint + tail)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the two-metric HPA keeps at each simulation step."""
        forecast = PredictivePolicy(self.quantile, self.forecast_utilization, self.hold)
        rate = forecast.rate_at(obs, self.ticks(obs))
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
