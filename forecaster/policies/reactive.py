"""``reactive``: the Kubernetes HPA on the observed demand, as teams run it today."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from forecaster.backtest.workload import WorkloadSpec
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior, HPAController

# Usage a forecast-driven path adds to the HPA: (value per sync tick, averageValue target).
ExtraMetric = tuple[np.ndarray, float]

UTILIZATION_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# The reactive path beside a forecast can run hotter: the forecast carries the margin, up to
# utilization 1 where the reactive path only catches demand above the ready capacity.
REACTIVE_PATH_GRID = (0.8, 0.9, 1.0)
# Per-HPA tolerance (both directions): the controller's default 10 % band, and none. Every
# HPA-based policy sweeps it, so a saving is never a tolerance setting the baseline lacked.
TOLERANCE_GRID = (0.1, 0.0)


class ReactivePolicy:
    """HPA with an ``AverageValue`` External metric on the demand rate.

    The metric at sync time ``t`` is the mean demand over
    ``[t - scrape_interval - rate_window, t - scrape_interval]``: a Prometheus ``rate()``
    over ``rate_window`` whose newest sample is one scrape old. The target per replica is
    ``capacity_per_replica * target_utilization``.

    Parameters
    ----------
    target_utilization
        Fraction of a replica's capacity to aim for; ``None`` takes the workload's.
    scrape_interval, rate_window
        Metric lag and smoothing, in seconds.
    behavior
        HPA behavior, tolerance and sync period (Kubernetes defaults).
    tolerance
        Per-HPA ``behavior.scaleUp/scaleDown.tolerance`` (Kubernetes 1.35+, or the
        controller flag); ``None`` keeps the one of ``behavior``.
    """

    knob: ClassVar[str | None] = "target_utilization"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        target_utilization: float | None = None,
        scrape_interval: float = 30.0,
        rate_window: float = 60.0,
        behavior: HPABehavior | None = None,
        tolerance: float | None = None,
    ) -> None:
        self.target_utilization = target_utilization
        self.scrape_interval = scrape_interval
        self.rate_window = rate_window
        self.behavior = behavior
        self.tolerance = tolerance

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Target utilizations from 0.5 to 1, crossed with the tolerance."""
        return tuple(
            {"target_utilization": u, "tolerance": t}
            for u, t in itertools.product(UTILIZATION_GRID, TOLERANCE_GRID)
        )

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the HPA keeps at each simulation step."""
        return self.plan_with(obs, ())

    def plan_with(self, obs: Observation, extra: Sequence[ExtraMetric]) -> np.ndarray:
        """Replicas of an HPA that also reads ``extra`` metrics (the max wins)."""
        behavior = self.hpa_behavior()
        sync = behavior.sync_period_seconds
        ticks = obs.step_times(sync)
        usage = obs.mean_rate(ticks - self.scrape_interval, self.rate_window)
        usages = [usage, *(values for values, _ in extra)]
        targets = [self.demand_target(obs.spec), *(t for _, t in extra)]
        controller = HPAController(behavior, obs.spec.min_replicas, obs.spec.max_replicas)
        # A controller that has been running holds its steady-state answer at the start.
        first = max((math.ceil(u[0] / t) for u, t in zip(usages, targets, strict=True)), default=0)
        initial = int(np.clip(first, obs.spec.min_replicas, obs.spec.max_replicas))
        return obs.hold_to_steps(controller.run(usages, targets, initial), sync)

    def demand_target(self, spec: WorkloadSpec) -> float:
        """``averageValue`` of the demand metric: demand per replica at the target utilization."""
        return spec.capacity_per_replica * (self.target_utilization or spec.target_utilization)

    def hpa_behavior(self) -> HPABehavior:
        """The behavior the controller runs with, tolerance applied."""
        return (self.behavior or HPABehavior()).with_tolerance(self.tolerance)

    def ticks(self, obs: Observation) -> np.ndarray:
        """Sync times of the controller (seconds from the first data point)."""
        return obs.step_times(self.hpa_behavior().sync_period_seconds)
