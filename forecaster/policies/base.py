"""What a capacity policy sees and returns.

A policy is pure: given an :class:`Observation` it returns the desired replica count for
every simulation step of the evaluation span. It plans the whole span in one call because
one Python call per 15 s step, times the sweeps of a backtest, would dominate the run time;
causality is a contract instead: the decision for a step at time ``t`` may only depend on
demand before ``t`` and on forecasts issued from origins already observed at ``t``. The
contract suite corrupts the future and checks that past decisions do not move. Only
``oracle`` declares ``uses_future``.

Time is measured in seconds from the first data point. Data value ``k`` is the mean demand
rate over ``[k * data_step, (k + 1) * data_step)`` and becomes known at the end of that
interval, so at time ``t`` the latest forecast origin is ``floor(t / data_step) - 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar, Protocol

import numpy as np
import pandas as pd

from forecaster import capacity
from forecaster.exceptions import ConfigError, DataValidationError, NotEnoughHistoryError
from forecaster.models.base import lead_window_forecast, quantile_column
from forecaster.resampling import DEFAULT_SIM_STEP, resample_demand
from forecaster.workload import WorkloadPolicy, WorkloadSpec

Grid = tuple[dict[str, float], ...]


@dataclass(frozen=True)
class QuantileForecast:
    """Quantile forecasts of the demand rate, one row per origin.

    Parameters
    ----------
    values
        Array ``(n_data, n_horizons, n_quantiles)``; row ``j`` was issued at origin ``j``
        (a data index) from data up to ``j`` only, NaN where no forecast was made.
    horizons
        Horizons in data steps, increasing; horizon ``h`` of origin ``j`` targets data
        index ``j + h``.
    quantiles
        Quantile levels of the last axis, increasing.
    window
        With a model's window target, array ``(n_data, n_quantiles)``: row ``j`` holds the
        quantiles of the largest demand over horizons ``horizons[0] .. horizons[-1]`` of
        origin ``j``; None without one.
    """

    values: np.ndarray
    horizons: tuple[int, ...]
    quantiles: tuple[float, ...]
    window: np.ndarray | None = None

    def __post_init__(self) -> None:
        expected = (len(self.horizons), len(self.quantiles))
        if self.values.ndim != 3 or self.values.shape[1:] != expected:
            raise DataValidationError(
                f"`values` must have shape (n_origins, {expected[0]}, {expected[1]}), "
                f"got {self.values.shape}"
            )
        if self.window is not None and self.window.shape != (len(self.values), expected[1]):
            raise DataValidationError(
                f"`window` must have shape ({len(self.values)}, {expected[1]}), "
                f"got {self.window.shape}"
            )

    @classmethod
    def from_long(
        cls,
        forecast: pd.DataFrame,
        window: pd.DataFrame | None,
        times: pd.DatetimeIndex,
        horizons: tuple[int, ...],
        quantiles: tuple[float, ...],
    ) -> QuantileForecast:
        """One series' forecasts in a model's long format (``predict``'s rows, and
        ``predict_window``'s or None), row ``j`` the origin at ``times[j]``."""
        columns = [quantile_column(q) for q in quantiles]
        values = np.full((len(times), len(horizons), len(quantiles)), np.nan)
        rows = times.get_indexer(pd.DatetimeIndex(forecast["origin"]))
        cells = np.searchsorted(horizons, forecast["horizon"].to_numpy())
        values[rows, cells, :] = forecast[columns].to_numpy(dtype=float)
        spanned = None
        if window is not None:
            spanned = np.full((len(times), len(quantiles)), np.nan)
            rows = times.get_indexer(pd.DatetimeIndex(window["origin"]))
            spanned[rows, :] = window[columns].to_numpy(dtype=float)
        return cls(values, horizons, quantiles, spanned)

    @property
    def window_span(self) -> tuple[int, int] | None:
        """First and last horizon of :attr:`window`; None without one."""
        return None if self.window is None else (self.horizons[0], self.horizons[-1])

    def window_max(self, quantile: float, first: int, last: int) -> np.ndarray:
        """Per origin, the ``quantile`` forecast of the largest demand over horizons
        ``first..last``: the window target where it covers exactly that window, else the
        largest per-horizon forecast (:func:`forecaster.models.base.lead_window_forecast`)."""
        matches = [i for i, q in enumerate(self.quantiles) if math.isclose(q, quantile)]
        if not matches:
            raise ConfigError(
                f"`quantile` must be one of the forecast quantiles {list(self.quantiles)}, "
                f"got {quantile!r}"
            )
        columns = [i for i, h in enumerate(self.horizons) if first <= h <= last]
        if len(columns) != last - first + 1:
            raise ConfigError(
                f"the policy needs forecast horizons {first}..{last} (data steps), "
                f"the forecast has {list(self.horizons)}"
            )
        largest: np.ndarray = self.values[:, columns, matches[0]].max(axis=1)
        window = None if self.window is None else self.window[:, matches[0]]
        return lead_window_forecast(largest, window, self.window_span, first, last)


@dataclass(frozen=True)
class Observation:
    """Everything a policy may read, with the time helpers policies share.

    Parameters
    ----------
    demand
        Demand rate per data step over the whole trace, history included.
    data_step
        Data step in seconds.
    start
        Index of the first evaluated data step; earlier values are history.
    spec
        The workload.
    sim_step
        Simulation step in seconds.
    train_window, retrain_every
        Walk-forward windows in data steps (``static`` resizes at each retrain).
    forecast
        Precomputed quantile forecasts for the forecast-driven policies.
    excluded
        Data cells ``[begin, end)`` of the evaluation span left out of scoring: gaps in the
        data too long to interpolate. ``demand`` holds a fill for them, so the simulation
        runs through them (replicas stay up, the queue carries), but no cost, unserved work
        or SLO minute is counted there.
    day_offset
        Seconds after UTC midnight at which the first data step starts: where policies
        keyed by the time of day (the warm buffer) find the hour of a data step.
    """

    demand: np.ndarray
    data_step: float
    start: int
    spec: WorkloadSpec
    sim_step: float = DEFAULT_SIM_STEP
    train_window: int = 0
    retrain_every: int = 0
    forecast: QuantileForecast | None = None
    excluded: tuple[tuple[int, int], ...] = ()
    day_offset: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.start < len(self.demand):
            raise NotEnoughHistoryError(
                f"`start` must leave history before it and data after it (0 < start < "
                f"{len(self.demand)}), got {self.start}"
            )
        for begin, end in self.excluded:
            if not self.start <= begin < end <= len(self.demand):
                raise ConfigError(
                    f"`excluded` intervals must lie in the evaluation span [{self.start}, "
                    f"{len(self.demand)}) and be non-empty, got {(begin, end)}"
                )

    @cached_property
    def sim_rate(self) -> np.ndarray:
        """Demand rate per simulation step over the evaluation span (computed once)."""
        return resample_demand(self.demand[self.start :], self.data_step, self.sim_step)

    @cached_property
    def scored(self) -> np.ndarray:
        """Per simulation step, whether it is scored: ``False`` where it overlaps an excluded
        cell (computed once)."""
        cells = np.zeros(len(self.demand) - self.start)
        for begin, end in self.excluded:
            cells[begin - self.start : end - self.start] = 1.0
        # the share of each step's time spent in excluded cells; exactly 0 away from them
        return resample_demand(cells, self.data_step, self.sim_step) == 0.0

    @property
    def n_steps(self) -> int:
        """Number of simulation steps in the evaluation span."""
        return len(self.sim_rate)

    def step_times(self, period: float | None = None) -> np.ndarray:
        """Decision times (seconds from the first data point) every ``period`` seconds."""
        period = self.sim_step if period is None else period
        span = (len(self.demand) - self.start) * self.data_step
        return self.start * self.data_step + np.arange(math.ceil(span / period)) * period

    def hold_to_steps(self, values: np.ndarray, period: float) -> np.ndarray:
        """Spread values decided every ``period`` seconds onto the simulation steps."""
        index = np.floor(np.arange(self.n_steps) * self.sim_step / period + 1e-9).astype(int)
        held: np.ndarray = values[np.minimum(index, len(values) - 1)]
        return held

    def latest_origin(self, times: np.ndarray) -> np.ndarray:
        """Index of the latest fully observed data step at each time."""
        origins: np.ndarray = np.floor(times / self.data_step + 1e-9).astype(int) - 1
        return origins

    def mean_rate(self, end: np.ndarray, window: float | np.ndarray) -> np.ndarray:
        """Mean demand rate over ``[end - window, end]``, clipped to the trace's start."""
        edges = np.arange(len(self.demand) + 1) * self.data_step
        cumulative = np.concatenate([[0.0], np.cumsum(self.demand * self.data_step)])
        lo = np.clip(end - window, 0.0, None)
        hi = np.clip(end, 0.0, None)
        width = np.maximum(hi - lo, 1e-9)
        rate: np.ndarray = (
            np.interp(hi, edges, cumulative) - np.interp(lo, edges, cumulative)
        ) / width
        return rate

    def replicas_for(self, rate: np.ndarray, utilization: float) -> np.ndarray:
        """``clamp(ceil(rate / (c * u)), min, max)`` with this workload's ``c``, min and max.

        The arithmetic is :func:`forecaster.capacity.desired_replicas`, the one the live
        planner uses, so a simulated plan and a served one round the same way.
        """
        spec = self.spec
        replicas: np.ndarray = capacity.desired_replicas(
            rate,
            capacity_per_replica=spec.capacity_per_replica,
            target_utilization=utilization,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
        )
        return replicas

    @property
    def lead_seconds(self) -> float:
        """``L`` of the workload: a backtest decides when the replicas are asked, so the lead
        is the cold start alone (no decision delay)."""
        return WorkloadPolicy(self.spec).lead_seconds

    def lead_horizons(self, hold: float) -> tuple[int, int]:
        """First and last horizon (data steps) of the lead window ``[t + L, t + L + hold]``."""
        return WorkloadPolicy(self.spec, hold=hold).horizon_range(self.data_step)

    def require_history(self, steps: int, what: str) -> None:
        """Raise :class:`NotEnoughHistoryError` unless ``steps`` precede ``start``."""
        if steps > self.start:
            raise NotEnoughHistoryError(
                f"{what} needs {steps} data steps of history before the evaluation, "
                f"got {self.start}"
            )


class Policy(Protocol):
    """A capacity policy: constructor arguments are its parameters; ``plan`` is pure."""

    knob: ClassVar[str | None]
    uses_future: ClassVar[bool]

    def plan(self, obs: Observation) -> np.ndarray:
        """Desired replicas for each simulation step of ``obs``."""
        ...

    @classmethod
    def sweep_grid(cls, spec: WorkloadSpec) -> Grid:
        """Parameter sets the frontier sweep tries."""
        ...
