"""``oracle``: perfect foresight, the cheapest fleet that serves all demand on arrival."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from forecaster.policies.base import Grid, Observation
from forecaster.workload import WorkloadSpec


class OraclePolicy:
    """The physical limit: every step's demand served by ready replicas, at least cost.

    Replicas are interchangeable and billed per step, so the cheapest schedule decomposes
    into levels: the ``k``-th replica is needed while ``ceil(rate / c) >= k``. Each level is
    asked one cold start before each of its busy runs, and kept through a gap no longer
    than the cold start (keeping costs the gap, re-asking costs the cold start). This is
    exact for a fixed cold start; a random one is planned at its planning value. Demand is
    served at utilization 1, without using the queue: the lower bound on cost among
    policies that never queue.
    """

    knob: ClassVar[str | None] = None
    uses_future: ClassVar[bool] = True

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """No knob: a single point."""
        return ({},)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas asked (ready or warming up) at each simulation step."""
        need = obs.replicas_for(obs.sim_rate, 1.0)
        lead = math.ceil(obs.spec.cold_start_model.planning_seconds / obs.sim_step - 1e-9)
        desired = np.zeros(len(need), dtype=int)
        for level in range(1, int(need.max(initial=0)) + 1):
            desired += _level_schedule(need >= level, lead)
        return desired


def _level_schedule(busy: np.ndarray, lead: int) -> np.ndarray:
    """0/1 asked replica of one level: busy runs merged over short gaps, asked ``lead`` early."""
    edges = np.diff(np.concatenate([[0], busy.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    separate = starts[1:] - ends[:-1] > lead
    starts = starts[np.concatenate([[True], separate])]
    ends = ends[np.concatenate([separate, [True]])]
    change = np.zeros(len(busy) + 1, dtype=int)
    np.add.at(change, np.maximum(starts - lead, 0), 1)
    np.add.at(change, ends, -1)
    schedule: np.ndarray = np.cumsum(change[:-1])
    return schedule
