"""``static``: a fixed fleet sized from the training window's peak, as many teams run."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forecaster.policies.base import Grid, Observation
from forecaster.workload import WorkloadSpec

# From 0.7 to 2 in steps of 0.025: every policy is tuned with about the same number of
# settings (tests/policies/test_sweeps.py), each on its main knob finely; then four rungs
# past twice the peak, as the open-ended grids get (forecaster.policies.reach).
HEADROOM_GRID = (*(round(0.7 + 0.025 * i, 3) for i in range(53)), 2.5, 3.0, 3.5, 4.0)


class StaticPolicy:
    """``ceil(headroom * peak / c)`` replicas, re-sized at each retrain.

    The peak is the largest demand of the trailing ``train_window`` before each retrain
    (the whole history when the observation sets no window).

    Parameters
    ----------
    headroom
        Multiplier of the training peak.
    """

    knob: ClassVar[str | None] = "headroom"
    uses_future: ClassVar[bool] = False

    def __init__(self, headroom: float = 1.0) -> None:
        self.headroom = headroom

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Headroom from 0.7 to 2, then 2.5 to 4."""
        return tuple({"headroom": h} for h in HEADROOM_GRID)

    def plan(self, obs: Observation) -> np.ndarray:
        """The fleet size in force at each simulation step."""
        window = obs.train_window or obs.start
        obs.require_history(window, "static")
        every = obs.retrain_every or len(obs.demand)
        data_index = obs.start + np.floor(
            np.arange(obs.n_steps) * obs.sim_step / obs.data_step + 1e-9
        ).astype(int)
        period_start = obs.start + (data_index - obs.start) // every * every
        starts = np.unique(period_start)
        peaks = np.array([obs.demand[s - window : s].max() for s in starts])
        fleet = obs.replicas_for(self.headroom * peaks, 1.0)
        result: np.ndarray = fleet[np.searchsorted(starts, period_start)]
        return result
