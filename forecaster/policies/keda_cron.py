"""``keda-cron``: what KEDA users run today, a cron trigger beside the reactive metric.

A KEDA ``ScaledObject`` with two triggers: the ``cron`` scaler (keda ``pkg/scalers/
cron_scaler.go``), which reports ``desiredReplicas`` as its metric while its window is active
with an ``AverageValue`` target of 1, so the HPA proposes exactly that many replicas; and the
demand metric, as :class:`~forecaster.policies.reactive.ReactivePolicy` runs it. The HPA takes
the larger proposal, so the cron schedule is a floor under the reactive path.

Teams write the schedule by hand from what they saw; here it is learned the way they would:
one cron window per hour of the week, its ``desiredReplicas`` sized for the ``quantile`` of
the demand seen in that hour of the week over the training window (p95 by default). The
schedule is relearned at each retrain from the trailing ``train_window``, like ``static``'s
fleet, so it is computed once per training block, not per decision.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forecaster.exceptions import ConfigError
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.memo import memoized
from forecaster.policies.reactive import ReactivePolicy, beside_reactive_path
from forecaster.workload import WorkloadSpec

HOUR = 3600.0
WEEK = 7 * 86400.0
# Quantiles of each hour of the week the schedule may be sized for; 10 x 3 x 2 = 60 settings.
QUANTILE_GRID = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 1.0)
# The cron scaler's metric target: its value is the replica count itself.
CRON_TARGET = 1.0


class KedaCronPolicy(ReactivePolicy):
    """HPA on the demand and on a learned hour-of-week cron schedule of replicas.

    Parameters
    ----------
    quantile
        Quantile of the demand in each schedule slot over the training window that the
        slot's ``desiredReplicas`` is sized for.
    slot, season
        Length of one cron window and of the repeating schedule, in seconds (an hour and a
        week; the clock starts at the first data point).
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of the reactive path and of the HPA (see :class:`ReactivePolicy`). The schedule is
        sized at the workload's target utilization.
    """

    knob: ClassVar[str | None] = "quantile"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        quantile: float = 0.95,
        slot: float = HOUR,
        season: float = WEEK,
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
        self.quantile = quantile
        self.slot = slot
        self.season = season

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """The schedule's quantile crossed with the reactive path's utilization and tolerance."""
        return beside_reactive_path("quantile", QUANTILE_GRID)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the two-trigger HPA keeps at each simulation step; with ``min_replicas``
        0 the cron trigger is also active (wakes the workload) while its window asks for
        replicas, as KEDA's cron scaler is."""
        return self.plan_with(
            obs,
            [(self.floor_at(obs, self.ticks(obs)), CRON_TARGET)],
            polled=lambda times: self.floor_at(obs, times) > 0,
        )

    def schedule(self, obs: Observation) -> tuple[np.ndarray, np.ndarray]:
        """First data index of each training block, and its learned demand per slot.

        Returns
        -------
        starts
            Data index at which each block's schedule takes effect, increasing.
        demand
            Array ``(len(starts), slots)``: the ``quantile`` of the demand of each slot over
            the ``train_window`` cells before the block's start; NaN for a slot none of them
            fell in.
        """
        if not 0 < self.quantile <= 1 or not 0 < self.slot <= self.season:
            raise ConfigError(
                "`quantile` must be in (0, 1] and `slot` in (0, season], got "
                f"{self.quantile!r}, {self.slot!r} and {self.season!r}"
            )
        key = ("keda-cron", self.quantile, self.slot, self.season)
        return memoized(obs, key, lambda: self._learn(obs))

    def _learn(self, obs: Observation) -> tuple[np.ndarray, np.ndarray]:
        window = obs.train_window or obs.start
        obs.require_history(window, "keda-cron")
        every = obs.retrain_every or len(obs.demand)
        starts = np.arange(obs.start, len(obs.demand), every)
        slots = max(1, round(self.season / self.slot))
        slot_of = self._slot(np.arange(len(obs.demand)) * obs.data_step, slots)
        demand = np.full((len(starts), slots), np.nan)
        for row, start in enumerate(starts):
            cells = slice(start - window, start)
            values, where = obs.demand[cells], slot_of[cells]
            for slot in np.unique(where):
                demand[row, slot] = np.quantile(values[where == slot], self.quantile)
        return starts, demand

    def floor_at(self, obs: Observation, times: np.ndarray) -> np.ndarray:
        """The cron trigger's ``desiredReplicas`` at ``times``; 0 where its slot has no data."""
        starts, demand = self.schedule(obs)
        index = np.floor(times / obs.data_step + 1e-9).astype(int)
        block = np.searchsorted(starts, index, side="right") - 1
        rate = demand[np.clip(block, 0, None), self._slot(times, demand.shape[1])]
        sized = obs.replicas_for(np.nan_to_num(rate), obs.spec.target_utilization)
        floor: np.ndarray = np.where(np.isnan(rate), 0.0, sized).astype(float)
        return floor

    def _slot(self, times: np.ndarray, slots: int) -> np.ndarray:
        """Schedule slot of each time (seconds from the first data point)."""
        slot: np.ndarray = np.floor(times / self.slot + 1e-9).astype(int) % slots
        return slot
