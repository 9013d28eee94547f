"""Shadow replay: what a fleet really ran against the hybrid fleet prewarm would have run.

Inputs are per data cell over the shadow period (cell ``k`` covers
``[k * step, (k + 1) * step)`` from the period's start): the demand rate, the replicas the
cluster ran and, when known, how many of them were ready; and prewarm's ask per forecast
origin. Everything is replayed through the backtest's simulator (:func:`simulate`) at its
step, so both fleets are scored with the same FIFO queue and SLO deadline.

- **actual**: the measured replicas are billed as they were; the queue is served by the
  measured *ready* replicas (the replicas when ready is unknown) as an already-ready fleet
  (no cold start is simulated on top of measured readiness). Without measured replicas the
  actual fleet is the backtest's reactive HPA at the workload's policy settings, simulated
  with the cold start (:func:`reactive_fleet`).
- **prewarm** (the hybrid fleet): per simulation step ``max(asks, actual replicas)``, the
  HPA taking the larger of prewarm's metric and its own proposal, simulated with the
  workload's cold start. The ask in force during data cell ``k`` is the one of origin
  ``k - 1``, the latest cell observed (as in the backtest), and an ask is kept for the HPA's
  scale-down stabilization window (the largest ask of the last 300 s, Kubernetes' default),
  as the HPA keeps any metric's recommendation; its scale-up rate limits are not applied.

Two counts of hours say where the fleets differ:

- ``added_hours``: simulation time during which the actual fleet dropped work (unserved
  > 0) while the hybrid fleet had more replicas ready: capacity prewarm had asked for at
  least a cold start earlier, there when the HPA's was not.
- ``idle_hours``: time during which prewarm asked for fewer replicas than the actual fleet
  ran, the asked replicas alone had the capacity for the demand, and the actual fleet
  dropped nothing: replicas the forecast says were idle. The hybrid fleet keeps them (it
  takes the max), so they are not a saving counted in its numbers; they are the room a
  hotter reactive target would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from forecaster.backtest.metrics import Metrics, compute_metrics
from forecaster.backtest.simulator import Trajectory, simulate
from forecaster.capacity import desired_replicas
from forecaster.exceptions import DataValidationError
from forecaster.metrics import coverage, pinball_loss
from forecaster.policies.autoscaler import DEFAULT_BEHAVIOR, reactive_policy
from forecaster.policies.base import Observation, QuantileForecast
from forecaster.resampling import DEFAULT_SIM_STEP, resample_demand
from forecaster.workload import WorkloadPolicy


@dataclass(frozen=True)
class ShadowResult:
    """One workload's shadow replay, per simulation step of ``step_seconds``.

    Attributes
    ----------
    actual, prewarm
        Trajectories of the actual and the hybrid fleet.
    actual_metrics, prewarm_metrics
        Their :class:`Metrics` (prices and SLO of the workload).
    asks
        prewarm's ask in force at each step, before the stabilization window.
    measured
        Whether the actual fleet is measured (``False``: the simulated reactive HPA).
    added_hours, idle_hours
        See the module docstring.
    """

    actual: Trajectory
    prewarm: Trajectory
    actual_metrics: Metrics
    prewarm_metrics: Metrics
    asks: np.ndarray
    measured: bool
    added_hours: float
    idle_hours: float


def sim_step_for(data_step: int) -> float:
    """The backtest's 15 s simulation step when it divides ``data_step``, else the data step
    (measured replicas are held per data cell and must land on whole simulation steps)."""
    return DEFAULT_SIM_STEP if data_step % DEFAULT_SIM_STEP == 0 else float(data_step)


def asks_per_origin(forecast: QuantileForecast, policy: WorkloadPolicy, step: int) -> np.ndarray:
    """prewarm's desired replicas at each origin of ``forecast``, as
    :func:`forecaster.capacity.plan_capacity` answers them: the largest forecast of the
    policy's quantile over its lead window, at its forecast utilization, clamped.

    An origin without a finite forecast asks for ``min_replicas`` (serving would answer the
    hold error there, and the HPA keeps its own proposal).
    """
    first, last = policy.horizon_range(step)
    rate = forecast.window_max(policy.tau, first, last)
    spec = policy.spec
    asks: np.ndarray = desired_replicas(
        np.where(np.isfinite(rate), rate, 0.0),
        capacity_per_replica=spec.capacity_per_replica,
        target_utilization=policy.forecast_u,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )
    return asks


def per_step(cells: np.ndarray, data_step: int, sim_step: float) -> np.ndarray:
    """Values per data cell held over each simulation step of the cell."""
    return np.repeat(np.asarray(cells), int(data_step // sim_step))


def stabilized(asks: np.ndarray, sim_step: float) -> np.ndarray:
    """The largest ask of the HPA's scale-down stabilization window ending at each step."""
    window = DEFAULT_BEHAVIOR.scale_down.stabilization_window_seconds
    width = math.floor(window / sim_step) + 1
    kept = pd.Series(asks).rolling(width, min_periods=1).max()
    return kept.to_numpy(dtype=int)


def reactive_fleet(
    demand: np.ndarray, start: int, data_step: int, policy: WorkloadPolicy
) -> np.ndarray:
    """Replicas per simulation step of the backtest's reactive HPA at ``policy``'s settings,
    over ``demand[start:]`` (the cells before ``start`` are its metric's history)."""
    obs = Observation(
        demand, float(data_step), start, policy.spec, sim_step=sim_step_for(data_step)
    )
    fleet: np.ndarray = reactive_policy(policy).plan(obs)
    return fleet


def recorded_replicas(
    demand: np.ndarray, data_step: int, policy: WorkloadPolicy
) -> tuple[np.ndarray, np.ndarray]:
    """Billed and ready replicas per data cell of the backtest's reactive HPA on ``demand``,
    as kube-state-metrics would record them: the count at each cell's start. Cell 0 is the
    metric's history; the HPA ran then what it runs at its first decision. Stands in for a
    cluster's recorded replicas where there is no cluster (tests, examples)."""
    sim = sim_step_for(data_step)
    obs = Observation(demand, float(data_step), 1, policy.spec, sim_step=sim)
    run = simulate(obs.sim_rate, reactive_policy(policy).plan(obs), policy.spec, step_seconds=sim)
    per_cell = round(data_step / sim)
    billed = np.concatenate([run.asked[:1], run.asked[::per_cell]])
    ready = np.concatenate([run.ready[:1], run.ready[::per_cell]])
    return billed, ready


def replay(
    demand: np.ndarray,
    data_step: int,
    policy: WorkloadPolicy,
    asks: np.ndarray,
    replicas: np.ndarray,
    ready: np.ndarray | None = None,
    *,
    measured: bool = True,
    seed: int = 0,
) -> ShadowResult:
    """Score the actual fleet and the hybrid fleet on ``demand`` (see the module docstring).

    Parameters
    ----------
    demand
        Demand rate per data cell of the period (finite, >= 0).
    data_step
        Data step in seconds.
    policy
        The workload's registered policy (capacity, cold start, prices, SLO).
    asks
        prewarm's ask per data cell: entry ``k`` is in force during cell ``k`` (the ask of
        origin ``k - 1``).
    replicas, ready
        With ``measured``, the replicas the cluster ran and those ready, per data cell
        (``ready`` defaults to ``replicas``). Without, the simulated actual fleet per
        simulation step (from :func:`reactive_fleet`).
    seed
        Seed of the cold-start draws.
    """
    spec = policy.spec
    sim_step = sim_step_for(data_step)
    rate = resample_demand(demand, data_step, sim_step)
    asked_cells = [asks] + ([replicas] if measured else [])
    if any(len(cells) != len(demand) for cells in asked_cells):
        raise DataValidationError(
            f"`asks` and `replicas` need one entry per demand cell ({len(demand)}), got "
            f"{[len(cells) for cells in asked_cells]}"
        )
    held_asks = per_step(asks, data_step, sim_step)
    if measured:
        billed = per_step(replicas, data_step, sim_step).astype(int)
        serving = per_step(replicas if ready is None else ready, data_step, sim_step).astype(int)
        actual = _measured_run(rate, billed, serving, policy, sim_step)
    else:
        billed = np.asarray(replicas, dtype=int)
        actual = simulate(rate, billed, spec, step_seconds=sim_step, seed=seed)
    hybrid = simulate(
        rate, np.maximum(stabilized(held_asks, sim_step), billed), spec,
        step_seconds=sim_step, seed=seed,
    )  # fmt: skip
    hours = sim_step / 3600.0
    added = (actual.unserved > 0) & (hybrid.ready > actual.ready)
    idle = (held_asks < billed) & (rate <= held_asks * spec.capacity_per_replica)
    idle &= actual.unserved == 0
    return ShadowResult(
        actual=actual,
        prewarm=hybrid,
        actual_metrics=compute_metrics(actual, spec),
        prewarm_metrics=compute_metrics(hybrid, spec),
        asks=held_asks,
        measured=measured,
        added_hours=float(np.count_nonzero(added)) * hours,
        idle_hours=float(np.count_nonzero(idle)) * hours,
    )


def _measured_run(
    rate: np.ndarray,
    billed: np.ndarray,
    serving: np.ndarray,
    policy: WorkloadPolicy,
    sim_step: float,
) -> Trajectory:
    """The measured fleet through the simulator's queue: ``serving`` replicas ready at every
    step (readiness is measured, so no cold start), ``billed`` billed, launches counted where
    the billed count rises."""
    warm = replace(policy.spec, cold_start=0.0)
    run = simulate(rate, serving, warm, step_seconds=sim_step, initial_ready=int(serving[0]))
    launched = np.maximum(np.diff(billed, prepend=billed[:1]), 0)
    return replace(run, asked=billed, launched=launched)


@dataclass(frozen=True)
class OnlineAccuracy:
    """Accuracy of the replayed forecasts of the policy's quantile at its lead horizon."""

    quantile: float
    horizon_seconds: int
    pinball: float | None
    coverage: float | None
    origins: int


def online_accuracy(
    demand: np.ndarray, forecast: QuantileForecast, policy: WorkloadPolicy, step: int
) -> OnlineAccuracy:
    """Pinball loss and coverage of ``Q_tau`` at the first horizon of the lead window, over
    every origin of ``forecast`` whose target lies in ``demand`` (aligned to its rows)."""
    horizon, _ = policy.horizon_range(step)
    column = forecast.horizons.index(horizon)
    level = next(i for i, q in enumerate(forecast.quantiles) if math.isclose(q, policy.tau))
    origins = np.arange(max(0, len(demand) - horizon))
    actual = demand[origins + horizon]
    predicted = forecast.values[origins, column, level]
    keep = np.isfinite(actual) & np.isfinite(predicted)
    if not keep.any():
        return OnlineAccuracy(policy.tau, horizon * step, None, None, 0)
    return OnlineAccuracy(
        quantile=policy.tau,
        horizon_seconds=horizon * step,
        pinball=pinball_loss(actual[keep], predicted[keep], policy.tau),
        coverage=coverage(actual[keep], predicted[keep]),
        origins=int(keep.sum()),
    )
