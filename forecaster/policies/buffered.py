"""``buffered``: the reactive HPA plus a warm buffer sized from the increases of the past.

The buffer path asks for the demand at the latest origin plus the ``buffer_quantile`` of the
demand increase over the lead window (:mod:`forecaster.buffer`), per hour of the day. It
needs no forecast model: it covers the bursts no forecast sees with spare replicas kept warm,
which a reactive HPA cannot have. :class:`~forecaster.policies.hybrid.HybridPolicy` takes the
same path as an option, beside its forecast.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forecaster.buffer import buffer_rate, fit_buffer, hour_of_day
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.memo import memoized
from forecaster.policies.reactive import ReactivePolicy, beside_reactive_path
from forecaster.workload import WorkloadSpec

# Quantiles of the increase, fine in the tail where the SLO is decided; with the reactive
# path's utilization and tolerance, the budget of settings the other policies get.
BUFFER_GRID = (0.5, 0.7, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999)


def walk_forward_buffer(obs: Observation, quantile: float, hold: float) -> np.ndarray:
    """Per data origin, the buffer in force there, learned as training would: row ``j`` is
    ``(ratio, level)``.

    The evaluation's retraining periods are those of the walk-forward forecasts: period
    ``p`` starts at data step ``s`` and serves origins ``s - 1 .. s + retrain_every - 2``
    with the buffer learned on the trailing ``train_window`` before ``s``, as training
    learns it (:func:`forecaster.buffer.fit_buffer`): only increases whose whole lead window
    lies before ``s``. NaN outside the evaluated origins.
    """

    def compute() -> np.ndarray:
        first, last = obs.lead_horizons(hold)
        window = obs.train_window or obs.start
        every = obs.retrain_every or len(obs.demand)
        n = len(obs.demand)
        hours = hour_of_day(np.arange(n), obs.data_step, obs.day_offset)
        out = np.full((n, 2), np.nan)
        for s in range(obs.start, n, every):
            lo = max(0, s - window)
            ratios, level = fit_buffer(obs.demand[lo:s], hours[lo:s], first, last, quantile)
            served = np.arange(s - 1, min(s + every - 1, n))
            out[served, 0] = np.asarray(ratios)[hours[served]]
            out[served, 1] = level
        return out

    result: np.ndarray = memoized(obs, ("warm-buffer", quantile, hold), compute)
    return result


def buffer_path(
    obs: Observation,
    times: np.ndarray,
    quantile: float,
    hold: float,
    buffer: tuple[tuple[float, ...], float] | None = None,
) -> np.ndarray:
    """Demand the buffer path asks for at each of ``times``, from the latest origin: the
    registered ``(ratios, level)`` when given, else the buffer learned walk-forward."""
    origins = obs.latest_origin(times)
    demand = obs.demand[origins]
    if buffer is not None:
        hours = hour_of_day(origins, obs.data_step, obs.day_offset)
        return buffer_rate(demand, np.asarray(buffer[0])[hours], buffer[1])
    learned = walk_forward_buffer(obs, quantile, hold)[origins]
    return buffer_rate(demand, learned[:, 0], learned[:, 1])


class BufferedPolicy(ReactivePolicy):
    """HPA on the demand and on ``demand(origin) + Q_q(increase over the lead window)``.

    The buffer path's target is a replica's whole capacity: its quantile is the margin.

    Parameters
    ----------
    buffer_quantile
        ``q`` of the increase kept warm.
    hold
        Seconds past the lead the increase's window extends.
    buffer
        A learned buffer, ``(24 hourly ratios, level)``, to plan with instead of learning
        one walk-forward: the registered one, when replaying what was served.
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of the reactive path and of the HPA (see :class:`ReactivePolicy`).
    """

    knob: ClassVar[str | None] = "buffer_quantile"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        buffer_quantile: float = 0.9,
        hold: float = 0.0,
        buffer: tuple[tuple[float, ...], float] | None = None,
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
        self.buffer_quantile = buffer_quantile
        self.hold = hold
        self.buffer = buffer

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """The increase's quantiles crossed with the reactive path's utilization and
        tolerance."""
        return beside_reactive_path("buffer_quantile", BUFFER_GRID)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the two-metric HPA keeps at each simulation step."""
        rate = buffer_path(obs, self.ticks(obs), self.buffer_quantile, self.hold, self.buffer)
        return self.plan_with(obs, [(rate, obs.spec.capacity_per_replica)])
