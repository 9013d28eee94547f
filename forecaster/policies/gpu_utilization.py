"""``gpu-utilization``: the Kubernetes HPA on DCGM GPU utilization, as many GPU fleets run it.

Many GPU fleets scale on ``DCGM_FI_DEV_GPU_UTIL`` (a Pods metric through prometheus-adapter,
or KEDA's Prometheus scaler) instead of on their demand. The utilization a replica reports
is derived here from the demand through the capacity model: a ready replica of capacity
``c`` serving its share of demand ``d`` is busy ``min(1, d / (ready * c))`` of the time. It
saturates at 100 % when the fleet is overloaded, so whatever the overload the HPA proposes at
most ``ready / target`` replicas, and replicas still warming up report nothing: an overloaded
fleet grows by a factor of at most ``1 / target`` per cold start, where an HPA on the demand
asks for all it needs at once. That is what a backtest against this policy measures.

Scrapes follow :class:`~forecaster.policies.reactive.ReactivePolicy`: samples every
``scrape_interval`` seconds from ``scrape_phase``, each the busy fraction of the simulation
step before it (DCGM samples the GPU over a second or less, so a scrape is close to
instantaneous), and the HPA reads their mean over ``rate_window``
(``avg_over_time(DCGM_FI_DEV_GPU_UTIL[1m])``).
"""

from __future__ import annotations

import bisect
import math
from typing import ClassVar

import numpy as np

from forecaster.policies.base import Observation
from forecaster.policies.hpa import FleetMetric
from forecaster.policies.reactive import ReactivePolicy

# Seed of the cold-start draws of the fleet the utilization is read from: a fixed cold start
# draws nothing; a distribution gives this fleet its own draws, not the simulator's.
FLEET_SEED = 0


class GPUUtilizationPolicy(ReactivePolicy):
    """HPA with a Pods metric on GPU utilization and an ``AverageValue`` target.

    ``target_utilization`` is the HPA's target (``averageValue: 70`` for 0.7): the controller
    proposes ``ceil(sum of the ready pods' utilization / target)``. The parameters are
    :class:`~forecaster.policies.reactive.ReactivePolicy`'s; ``rate_window`` is the
    averaging window of the utilization samples.

    The ready replicas are those the policy itself asked for, each ready one cold start
    after its ask (rounded up to the simulation step) and removed pending ones first, as
    the simulator does; the cluster starts warm. Pods still warming up report no
    utilization, as the controller counts unready pods at 0 when it scales up. The
    tolerance compares the summed utilization with the target times the replicas asked
    (the controller's own comparison uses the ready pods' mean): the two differ only while
    replicas are warming up.
    """

    # A fleet at zero has no pod to report a utilization: a KEDA trigger on it keeps a
    # running fleet up, but cannot wake one from zero.
    own_metric_wakes: ClassVar[bool] = False

    def own_metric(
        self, obs: Observation, ticks: np.ndarray, demand: np.ndarray, initial: int
    ) -> tuple[np.ndarray | FleetMetric, float]:
        """The summed GPU utilization of the ready pods, and the target utilization."""
        target = self.target_utilization or obs.spec.target_utilization
        self.check_scrapes()
        return GPUUtilization(obs, ticks, self, initial, target), target


class GPUUtilization:
    """The :class:`~forecaster.policies.hpa.FleetMetric` of :class:`GPUUtilizationPolicy`.

    Each call applies the controller's previous decision to the fleet, takes the scrapes
    that have happened since the previous tick (each from the demand before it and the
    replicas ready then), and returns the ready pods' summed mean utilization over the
    averaging window. With no ready pod or no sample the controller gets no metric and
    holds, as the HPA does on a failed metric.
    """

    def __init__(
        self,
        obs: Observation,
        ticks: np.ndarray,
        policy: ReactivePolicy,
        initial: int,
        target: float,
    ) -> None:
        self.ticks = ticks.tolist()
        self.target = target
        self.capacity = obs.spec.capacity_per_replica
        self.sim_step = obs.sim_step
        self.cold_start = obs.spec.cold_start_model
        self.rng = np.random.default_rng(FLEET_SEED)
        interval, phase = policy.scrape_interval, policy.scrape_phase
        self.window = policy.rate_window
        # Every scrape from one window before the first tick to the last tick, oldest first,
        # and the demand of the simulation step before each.
        first = phase + interval * math.floor((ticks[0] - self.window - phase) / interval)
        count = math.floor((ticks[-1] - first) / interval + 1e-9) + 1
        scrapes = first + interval * np.arange(count)
        self.scrapes = scrapes.tolist()
        self.scraped_rates = obs.mean_rate(scrapes, obs.sim_step).tolist()
        self.samples: list[float] = []  # utilization of each scrape taken so far
        self.oldest = 0  # the first sample inside the averaging window
        self.ready = initial
        self.pending: list[float] = []  # ready times of the replicas warming up, sorted
        self.asked = initial

    def __len__(self) -> int:
        return len(self.ticks)

    def __call__(self, tick: int, replicas: int) -> float:
        now = self.ticks[tick]
        if tick:
            self._apply(tick, replicas)
        scrapes, samples = self.scrapes, self.samples
        while len(samples) < len(scrapes) and scrapes[len(samples)] <= now:
            self._promote(scrapes[len(samples)])
            rate = self.scraped_rates[len(samples)]
            ready = self.ready * self.capacity
            samples.append(min(1.0, rate / ready) if ready else math.nan)
        self._promote(now)
        while self.oldest < len(samples) and scrapes[self.oldest] <= now - self.window:
            self.oldest += 1
        recent = [u for u in samples[self.oldest :] if not math.isnan(u)]
        if not self.ready or not recent:
            return replicas * self.target  # no metric: a usage ratio of 1, the HPA holds
        return self.ready * sum(recent) / len(recent)

    def _apply(self, tick: int, replicas: int) -> None:
        """The replicas asked at the previous tick: warm at the first, as the cluster starts."""
        asked_at = self.ticks[tick - 1]
        self._promote(asked_at)
        if tick == 1:
            self.ready, self.pending, self.asked = replicas, [], replicas
            return
        if replicas > self.asked:
            for seconds in self.cold_start.sample(self.rng, replicas - self.asked).tolist():
                steps = math.ceil(seconds / self.sim_step - 1e-9)
                bisect.insort(self.pending, asked_at + steps * self.sim_step)
            self._promote(asked_at)
        elif replicas < self.asked:
            excess = self.asked - replicas
            drop = min(excess, len(self.pending))
            del self.pending[len(self.pending) - drop :]
            self.ready -= excess - drop
        self.asked = replicas

    def _promote(self, now: float) -> None:
        """Replicas whose cold start has elapsed by ``now`` become ready."""
        while self.pending and self.pending[0] <= now:
            self.pending.pop(0)
            self.ready += 1
