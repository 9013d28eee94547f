"""``predictive``: size for the quantile forecast over the lead window (DESIGN section 5)."""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import numpy as np

from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.policies.base import Grid, Observation
from forecaster.policies.reach import rungs
from forecaster.workload import WorkloadSpec

# The quantiles the walk-forward forecasts carry, and so the ones a sweep can try. Fine in the
# upper tail: between 0.9 and 0.99 one grid step changes the fleet by several replicas, and a
# coarse grid puts the cost at the SLO at whichever point happens to lie past it.
QUANTILE_GRID = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99)
# Utilizations the forecast alone is tried at: below 1 it buys margin past the quantile, and
# the policy gets about the budget of settings the others get.
FORECAST_UTILIZATION_GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)


class PredictivePolicy:
    """``desired = clamp(ceil(max_{h in [L, L+hold]} Q_tau(t+h) / (c * u)), min, max)``.

    ``L`` is the workload's planning cold start; the forecast in force at time ``t`` is the
    one from the latest fully observed origin, so the policy changes its answer once per
    data step.

    A replica is released only when no answer of the last ``L`` seconds still wants it: the
    answers given during ``[t - L, t]`` sized the demand of ``[t, t + L + hold]``, and a
    replica dropped now could not be back before ``t + L``. (Sizing for ``t + L`` alone
    would drop, on a falling edge, replicas the demand of the next ``L`` seconds needs.)
    Through an HPA, its scale-down stabilization window does the same.

    Parameters
    ----------
    quantile
        ``tau``; ``None`` takes the workload's (explicit, newsvendor or tier).
    target_utilization
        ``u``; ``None`` takes the workload's.
    hold
        Seconds past the lead a replica is kept for demand forecast to come back.
    """

    knob: ClassVar[str | None] = "quantile"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        quantile: float | None = None,
        target_utilization: float | None = None,
        hold: float = 0.0,
    ) -> None:
        self.quantile = quantile
        self.target_utilization = target_utilization
        self.hold = hold

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """The forecast quantiles crossed with the utilizations, and the top quantile at the
        rungs of :mod:`forecaster.policies.reach`."""
        fine = tuple(
            {"quantile": q, "target_utilization": u}
            for q, u in itertools.product(QUANTILE_GRID, FORECAST_UTILIZATION_GRID)
        )
        return fine + rungs(lambda u: {"quantile": QUANTILE_GRID[-1], "target_utilization": u})

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas for the forecast in force at each simulation step."""
        rate = self.rate_at(obs, obs.step_times())
        sized = obs.replicas_for(rate, self.target_utilization or obs.spec.target_utilization)
        lead_steps = math.ceil(obs.lead_seconds / obs.sim_step - 1e-9)
        return _trailing_max(sized, lead_steps + 1)

    def rate_at(self, obs: Observation, times: np.ndarray) -> np.ndarray:
        """Largest forecast rate over the lead window, as known at each of ``times``."""
        if obs.forecast is None:
            raise ConfigError("this policy needs forecasts: `Observation.forecast` is None")
        first, last = obs.lead_horizons(self.hold)
        per_origin = obs.forecast.window_max(self.quantile or obs.spec.tau, first, last)
        origins = obs.latest_origin(times)
        if origins.min() < 0 or origins.max() >= len(per_origin):
            raise DataValidationError(
                f"forecasts cover origins 0..{len(per_origin) - 1}, the evaluation needs "
                f"{origins.min()}..{origins.max()}"
            )
        rate = per_origin[origins]
        if np.isnan(rate).any():
            missing = np.unique(origins[np.isnan(rate)])
            raise DataValidationError(
                f"no forecast for {len(missing)} origins the evaluation needs, first {missing[0]}"
            )
        return np.maximum(rate, 0.0)


def _trailing_max(values: np.ndarray, width: int) -> np.ndarray:
    """Max of ``values`` over the last ``width`` steps, this one included."""
    if width <= 1 or len(values) == 0:
        return values
    padded = np.concatenate([np.full(width - 1, values[0]), values])
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    result: np.ndarray = windows.max(axis=1)
    return result
