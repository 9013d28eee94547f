"""``reactive``: the Kubernetes HPA on the observed demand, as teams run it today."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np

from forecaster.activation import KedaActivation, awake_replicas, is_active
from forecaster.exceptions import ConfigError
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import FleetMetric, HPABehavior, HPAController
from forecaster.policies.reach import hpa_rungs
from forecaster.workload import WorkloadSpec

# Usage a forecast-driven path adds to the HPA: (value per sync tick, averageValue target).
ExtraMetric = tuple[np.ndarray, float]
# Whether a KEDA trigger is active at given times (seconds from the first data point).
Activity = Callable[[np.ndarray], np.ndarray]

# Target utilizations from 0.3 to 1 in steps of 0.025: the reactive HPA's one knob, as fine
# as the budget of settings the other policies get (tests/policies/test_sweeps.py).
UTILIZATION_GRID = tuple(round(0.3 + 0.025 * i, 3) for i in range(29))
# The reactive path beside a forecast can run hotter: the forecast carries the margin, up to
# utilization 1 where the reactive path only catches demand above the ready capacity.
REACTIVE_PATH_GRID = (0.8, 0.9, 1.0)
# Per-HPA tolerance (both directions): the controller's default 10 % band, and none. Every
# HPA-based policy sweeps it, so a saving is never a tolerance setting the baseline lacked.
TOLERANCE_GRID = (0.1, 0.0)


def beside_reactive_path(knob: str, values: Sequence[float]) -> Grid:
    """``knob`` over ``values`` (least margin first), crossed with the reactive path's
    utilization and tolerance, then the HPA's own rungs with ``knob`` at its least margin
    (:func:`~forecaster.policies.reach.hpa_rungs`): the grid of every policy that adds a
    path to the HPA's own, so all are searched alike.

    Examples
    --------
    >>> len(beside_reactive_path("margin", (1.0, 1.2)))
    16
    >>> beside_reactive_path("margin", (1.0,))[0]
    {'margin': 1.0, 'target_utilization': 0.8, 'tolerance': 0.1}
    >>> beside_reactive_path("margin", (1.0, 1.2))[-1]
    {'margin': 1.0, 'target_utilization': 0.1, 'tolerance': 0.1}
    """
    fine = tuple(
        {knob: v, "target_utilization": u, "tolerance": t}
        for v, u, t in itertools.product(values, REACTIVE_PATH_GRID, TOLERANCE_GRID)
    )
    return fine + hpa_rungs({knob: values[0]})


class ReactivePolicy:
    """HPA with an ``AverageValue`` External metric on the demand rate.

    The metric at sync time ``t`` is what ``rate(requests_total[rate_window])`` returns at
    ``t`` for a counter of the demand scraped every ``scrape_interval`` seconds, at
    ``scrape_phase + k * scrape_interval``: the increase between the oldest and the newest
    sample in ``(t - rate_window, t]`` over the time between them (Prometheus then
    extrapolates that increase to the window's edges and divides by the window, which
    leaves the rate of regularly spaced samples unchanged), so the mean demand between the
    two samples. At the defaults, a 30 s scrape and ``[1m]``, that is the mean over the
    30 s before the newest sample, which is 0 to 30 s old depending on the phase. The
    target per replica is ``capacity_per_replica * target_utilization``.

    Parameters
    ----------
    target_utilization
        Fraction of a replica's capacity to aim for; ``None`` takes the workload's.
    scrape_interval, rate_window
        Prometheus' scrape interval and the ``rate()`` window, in seconds; the window must
        hold two samples, so at least two scrape intervals.
    scrape_phase
        Seconds from the first data point to the first scrape, in ``[0, scrape_interval)``.
    behavior
        HPA behavior, tolerance and sync period (Kubernetes defaults).
    tolerance
        Per-HPA ``behavior.scaleUp/scaleDown.tolerance`` (Kubernetes 1.35+, or the
        controller flag); ``None`` keeps the one of ``behavior``.
    """

    knob: ClassVar[str | None] = "target_utilization"
    uses_future: ClassVar[bool] = False
    # With min_replicas 0, whether KEDA's trigger on this HPA's own metric can wake the
    # workload from zero: the demand is seen with no pod running (active above 0).
    own_metric_wakes: ClassVar[bool] = True

    def __init__(
        self,
        target_utilization: float | None = None,
        scrape_interval: float = 30.0,
        rate_window: float = 60.0,
        behavior: HPABehavior | None = None,
        tolerance: float | None = None,
        scrape_phase: float = 0.0,
    ) -> None:
        self.target_utilization = target_utilization
        self.scrape_interval = scrape_interval
        self.rate_window = rate_window
        self.behavior = behavior
        self.tolerance = tolerance
        self.scrape_phase = scrape_phase

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Target utilizations from 0.3 to 1, crossed with the tolerance, and the rungs of
        :mod:`forecaster.policies.reach`."""
        fine = tuple(
            {"target_utilization": u, "tolerance": t}
            for u, t in itertools.product(UTILIZATION_GRID, TOLERANCE_GRID)
        )
        return fine + hpa_rungs()

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the HPA keeps at each simulation step."""
        return self.plan_with(obs, ())

    def plan_with(
        self,
        obs: Observation,
        extra: Sequence[ExtraMetric],
        pushed: Activity | None = None,
        polled: Activity | None = None,
    ) -> np.ndarray:
        """Replicas of an HPA that also reads ``extra`` metrics (the max wins).

        With ``min_replicas`` 0, KEDA owns 0 <-> 1 (:mod:`forecaster.activation`): its
        ``prometheus`` trigger on the demand is active above 0 and is polled; ``polled`` and
        ``pushed`` give, at the sync ticks, the activity of a polled and of a push trigger
        beside it.
        """
        behavior = self.hpa_behavior()
        sync = behavior.sync_period_seconds
        ticks = obs.step_times(sync)
        demand = self.metric(obs, ticks)
        steady = [(demand, self.demand_target(obs.spec)), *extra]
        low = max(1, obs.spec.min_replicas)  # KEDA's HPA runs from max(1, minReplicaCount)
        controller = HPAController(behavior, low, obs.spec.max_replicas)
        # A controller that has been running holds its steady-state answer at the start.
        first = max(math.ceil(u[0] / t) for u, t in steady)
        initial = int(np.clip(first, low, obs.spec.max_replicas))

        def run(begin: int, end: int, start: int) -> np.ndarray:
            """The HPA over ticks ``[begin, end)`` from ``start`` replicas (a fleet metric
            is built for the span, its fleet warm at its start)."""
            own, target = self.own_metric(obs, ticks[begin:end], demand[begin:end], start)
            usages = [own, *(values[begin:end] for values, _ in extra)]
            return controller.run(usages, [target, *(t for _, t in extra)], start)

        if obs.spec.min_replicas > 0:
            return obs.hold_to_steps(run(0, len(ticks), initial), sync)
        own = is_active(demand)
        others = np.zeros_like(own) if polled is None else polled(ticks)
        awake = KedaActivation().awake(
            ticks,
            own | others if self.own_metric_wakes else others,
            None if pushed is None else pushed(ticks),
            sustained=None if self.own_metric_wakes else own,
        )
        return obs.hold_to_steps(awake_replicas(awake, run, initial), sync)

    def own_metric(
        self, obs: Observation, ticks: np.ndarray, demand: np.ndarray, initial: int
    ) -> tuple[np.ndarray | FleetMetric, float]:
        """The metric this HPA scales on and its ``averageValue`` target: here the demand
        metric (:meth:`metric` at ``ticks``) and :meth:`demand_target`.

        ``initial`` is the replica count the controller starts from, warm.
        """
        return demand, self.demand_target(obs.spec)

    def metric(self, obs: Observation, times: np.ndarray) -> np.ndarray:
        """The demand metric the HPA reads at ``times``: Prometheus' ``rate()`` (see above)."""
        self.check_scrapes()
        interval, window, phase = self.scrape_interval, self.rate_window, self.scrape_phase
        # The 1e-9 keeps a sample taken exactly at t (or exactly at t - window) on the
        # right side of the boundary despite rounding.
        newest = phase + interval * np.floor((times - phase) / interval + 1e-9)
        samples = np.ceil((window - (times - newest)) / interval - 1e-9)
        return obs.mean_rate(newest, (samples - 1) * interval)

    def check_scrapes(self) -> None:
        """Refuse scrape settings no Prometheus could run (the window must hold two samples)."""
        interval, window, phase = self.scrape_interval, self.rate_window, self.scrape_phase
        if not interval > 0 or window < 2 * interval or not 0 <= phase < interval:
            raise ConfigError(
                "`scrape_interval` must be > 0, `rate_window` at least two scrape intervals "
                "and `scrape_phase` in [0, scrape_interval), got "
                f"{interval!r}, {window!r} and {phase!r}"
            )

    def demand_target(self, spec: WorkloadSpec) -> float:
        """``averageValue`` of the demand metric: demand per replica at the target utilization."""
        return spec.capacity_per_replica * (self.target_utilization or spec.target_utilization)

    def hpa_behavior(self) -> HPABehavior:
        """The behavior the controller runs with, tolerance applied."""
        return (self.behavior or HPABehavior()).with_tolerance(self.tolerance)

    def ticks(self, obs: Observation) -> np.ndarray:
        """Sync times of the controller (seconds from the first data point)."""
        return obs.step_times(self.hpa_behavior().sync_period_seconds)
