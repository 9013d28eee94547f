"""``seasonal-naive``: last week's demand as the forecast, plus the reactive path.

The strong cheap baseline: no model, just the demand one season ago over the lead window,
rescaled by how the recent level compares with the same hour a season ago.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forecaster.exceptions import ConfigError
from forecaster.policies.base import Grid, Observation
from forecaster.policies.hpa import HPABehavior
from forecaster.policies.reach import BESIDE, rungs
from forecaster.policies.reactive import ReactivePolicy, beside_reactive_path
from forecaster.workload import WorkloadSpec

HEADROOM_GRID = tuple(round(0.7 + 0.1 * i, 1) for i in range(10))  # 0.7 to 1.6
WEEK = 7 * 86400.0


class SeasonalNaivePolicy(ReactivePolicy):
    """HPA on the demand and on ``headroom * level * demand(t + h - season)``.

    Parameters
    ----------
    headroom
        Multiplier of the seasonal forecast.
    season
        Seconds between the target and the value used for it (one week).
    level_window
        Seconds over which the recent level is compared with the same span a season ago.
    hold
        Seconds past the lead the forecast window extends.
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of the reactive path and of the HPA (see :class:`ReactivePolicy`).
    """

    knob: ClassVar[str | None] = "headroom"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        headroom: float = 1.0,
        season: float = WEEK,
        level_window: float = 3600.0,
        hold: float = 0.0,
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
        self.headroom = headroom
        self.season = season
        self.level_window = level_window
        self.hold = hold

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Headroom crossed with the reactive path's utilization and the tolerance.

        The same reactive-path and tolerance grid as ``hybrid``, so the comparison of the
        two isolates what the model's forecast adds over last week's demand; and the rungs of
        :mod:`forecaster.policies.reach` (headroom ``1/u``).
        """
        fine = beside_reactive_path("headroom", HEADROOM_GRID)
        return fine + rungs(lambda u: {"headroom": round(1 / u, 6)} | BESIDE)

    def forecast(self, obs: Observation) -> np.ndarray:
        """Forecast rate per origin (data index); NaN before enough history exists."""
        season = round(self.season / obs.data_step)
        level = max(1, round(self.level_window / obs.data_step))
        first, last = obs.lead_horizons(self.hold)
        if season < last:
            raise ConfigError(
                f"`season` ({self.season!r} s) must reach past the lead window "
                f"({last} data steps of {obs.data_step:g} s)"
            )
        obs.require_history(season + level - 1, "seasonal-naive")
        demand = obs.demand
        n = len(demand)
        # seasonal[j] = max over h of demand[j + h - season], for every origin j that has it
        shifted = np.full((n, last - first + 1), np.nan)
        for column, h in enumerate(range(first, last + 1)):
            lag = season - h
            shifted[lag:, column] = demand[: n - lag]
        seasonal = shifted.max(axis=1)
        recent = _trailing_mean(demand, level)
        before = np.full(n, np.nan)
        before[season:] = recent[: n - season]
        ratio = np.divide(recent, before, out=np.ones(n), where=before > 0)
        return self.headroom * ratio * seasonal

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the two-metric HPA keeps at each simulation step."""
        rate = self.forecast(obs)[obs.latest_origin(self.ticks(obs))]
        target = obs.spec.capacity_per_replica * obs.spec.target_utilization
        return self.plan_with(obs, [(rate, target)])


def _trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of ``values[j - window + 1 .. j]``; NaN until ``window`` values exist."""
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    out = np.full(len(values), np.nan)
    out[window - 1 :] = (cumulative[window:] - cumulative[:-window]) / window
    return out
