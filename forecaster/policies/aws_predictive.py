"""``aws-predictive``: AWS EC2 Auto Scaling predictive scaling beside target tracking.

After the documented behaviour (Amazon EC2 Auto Scaling User Guide, "How predictive scaling
works"; API ``PredictiveScalingConfiguration``):

- the policy analyses up to 14 days of the load metric's history, hourly, and needs at least
  24 hours of it before it forecasts;
- it forecasts the load hourly for the next 48 hours and updates that forecast every 6 hours;
- capacity for each hour is the forecast load over the metric's target value, capped at the
  group's maximum (``MaxCapacityBreachBehavior: HonorMaxCapacity``), and is applied as a
  scheduled minimum at the start of the hour, launched ``SchedulingBufferTime`` early
  (default 300 s);
- predictive scaling never scales in: AWS recommends it together with a dynamic (target
  tracking) policy, and the group runs the larger of the two. Target tracking is the
  reactive HPA here (:class:`~forecaster.policies.reactive.ReactivePolicy`), and the
  scheduled minimum enters it as a metric whose value is the replica count with target 1,
  so the HPA proposes at least that many.

AWS's forecasting model is not public. The stand-in is a seasonal model on the hourly data:
the forecast for an hour is the mean of the same hour of the week over the weeks of history
(at most two in 14 days), or, when the history holds no such week, the mean of the same hour
of the day over its days. The clock's hours start at the first data point. Forecasts depend
on the history only through hourly means, so the whole plan is a handful of array operations.
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

HOUR = 3600.0
# The documented windows, in forecast intervals (hours).
HISTORY = 14 * 24
MIN_HISTORY = 24
HORIZON = 48
UPDATE_EVERY = 6
WEEKLY, DAILY = 7 * 24, 24
# The predictive policy's target utilization; 10 x 3 x 2 = 60 settings.
FORECAST_UTILIZATION_GRID = (1.0, 0.9, 0.8, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4)
# The scheduled minimum's metric target: its value is the replica count itself.
FLOOR_TARGET = 1.0


class AWSPredictivePolicy(ReactivePolicy):
    """Target tracking (the reactive HPA) over an hourly forecast-driven scheduled minimum.

    Parameters
    ----------
    forecast_utilization
        Target utilization of the predictive policy's metric: the forecast load per
        replica is ``capacity_per_replica * forecast_utilization``.
    buffer
        ``SchedulingBufferTime``: seconds before each hour its capacity is launched; less
        than ``interval``.
    interval
        Seconds per forecast interval (an hour).
    target_utilization, scrape_interval, rate_window, behavior, tolerance, scrape_phase
        Of the target-tracking path and of the HPA (see :class:`ReactivePolicy`).
    """

    knob: ClassVar[str | None] = "forecast_utilization"
    uses_future: ClassVar[bool] = False

    def __init__(
        self,
        forecast_utilization: float = 1.0,
        buffer: float = 300.0,
        interval: float = HOUR,
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
        self.forecast_utilization = forecast_utilization
        self.buffer = buffer
        self.interval = interval

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """The predictive target crossed with target tracking's utilization and tolerance,
        and the rungs of :mod:`forecaster.policies.reach`."""
        fine = beside_reactive_path("forecast_utilization", FORECAST_UTILIZATION_GRID)
        return fine + rungs(lambda u: {"forecast_utilization": u} | BESIDE)

    def plan(self, obs: Observation) -> np.ndarray:
        """Replicas the HPA keeps with the scheduled minimum as a second metric."""
        return self.plan_with(obs, [(self.floor_at(obs, self.ticks(obs)), FLOOR_TARGET)])

    def floor_at(self, obs: Observation, times: np.ndarray) -> np.ndarray:
        """The scheduled minimum in force at ``times``; 0 where no forecast covers it.

        The action for hour ``H`` runs at ``H * interval - buffer`` with the forecast of the
        latest update issued by then.
        """
        if not 0 <= self.buffer < self.interval or self.forecast_utilization <= 0:
            raise ConfigError(
                "`buffer` must be in [0, interval) and `forecast_utilization` > 0, got "
                f"{self.buffer!r}, {self.interval!r} and {self.forecast_utilization!r}"
            )
        hour = np.floor((times + self.buffer) / self.interval + 1e-9).astype(int)
        issued = np.floor((hour * self.interval - self.buffer) / self.interval + 1e-9)
        update = (issued.astype(int) // UPDATE_EVERY) * UPDATE_EVERY
        load = self.forecast(obs, update, hour)
        sized = obs.replicas_for(np.nan_to_num(load), self.forecast_utilization)
        floor: np.ndarray = np.where(np.isnan(load), 0.0, sized).astype(float)
        return floor

    def forecast(self, obs: Observation, update: np.ndarray, hour: np.ndarray) -> np.ndarray:
        """Load forecast for interval ``hour`` issued at the start of interval ``update``.

        NaN where the update had less than a day of history or the target lies past its
        48-interval horizon.
        """
        hourly = self.hourly(obs)
        first = np.maximum(update - HISTORY, 0)
        out = np.full(len(hour), np.nan)
        for season, seasons in ((DAILY, HISTORY // DAILY), (WEEKLY, HISTORY // WEEKLY)):
            # weekly lags win where the history holds one (this pass runs last)
            total, count = np.zeros(len(hour)), np.zeros(len(hour))
            for k in range(1, seasons + 1):
                lag = hour - k * season
                ok = (lag >= first) & (lag < update) & (lag < len(hourly))
                total[ok] += hourly[lag[ok]]
                count[ok] += 1
            out = np.where(count > 0, total / np.maximum(count, 1), out)
        known = (update >= MIN_HISTORY) & (hour >= update) & (hour < update + HORIZON)
        result: np.ndarray = np.where(known, out, np.nan)
        return result

    def hourly(self, obs: Observation) -> np.ndarray:
        """Mean demand of each complete interval of the trace, from the first data point."""
        complete = int(len(obs.demand) * obs.data_step // self.interval)
        ends = (np.arange(complete) + 1) * self.interval
        return obs.mean_rate(ends, self.interval)
