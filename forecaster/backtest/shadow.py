"""Shadow replay: what a fleet really ran against the hybrid fleet prewarm would have run.

The replay reads an :class:`~forecaster.policies.Observation` as the backtest builds it
(:func:`forecaster.backtest.run.observe`): the demand per data cell with the model's
context before the period (``obs.start`` is the period's first cell) and the champion's
forecasts, rows aligned to the cells. Fleets are per simulation step of the period
(``obs.sim_step``): the replicas the cluster ran and, when known, how many were ready, and
prewarm's asks when ``prewarm serve --shadow`` recorded them. Everything is replayed
through the backtest's simulator (:func:`simulate`) at that step, so both fleets are scored
with the same FIFO queue and SLO deadline.

- **actual**: the measured replicas are billed as they were; the queue is served by the
  measured *ready* replicas (the replicas when ready is unknown) as an already-ready fleet
  (no cold start is simulated on top of measured readiness). Without measured replicas the
  actual fleet is the backtest's reactive HPA at the workload's policy settings, simulated
  with the cold start (:func:`reactive_fleet`).
- **prewarm** (the hybrid fleet): what an HPA reading prewarm's metric beside its own runs,
  ``max(forecast path, actual replicas)`` per step, simulated with the workload's cold
  start. The HPA takes the largest proposal of its metrics, then the highest recommendation
  of its scale-down stabilization window; a max over metrics commutes with that window's
  max, so the actual replicas, which already are what the HPA's own metrics made of the
  window, are its reactive path as they are (fed through the HPA model again they would be
  held for the window twice). The forecast path is the project's HPA model on prewarm's
  metric alone (:func:`forecast_path`): the behavior, tolerance and target of the backtest's
  hybrid (:func:`forecaster.policies.autoscaler.hybrid_policy`). On a cluster the rate
  limits and the tolerance band apply to the combined count rather than to each path's:
  the one difference from the backtest's two-metric HPA this composition keeps.

prewarm's metric is the forecast demand the HPA reads at each of its ticks
(``prewarm_forecast_demand``: the policy's quantile, largest over its lead window, from the
latest origin observed) at the target ``capacity_per_replica * forecast_utilization``, as
``prewarm manifests`` renders it and the backtest simulates it: **replayed** from the
champion's forecasts, or **recorded**, the same metric as ``serve --shadow`` exported it.
The recorded values are used when they cover at least :data:`ASKS_COVERAGE` of the period's
steps, the steps without a value taking the replayed one; below that the metric is replayed
entirely (:func:`recorded_asks`). Either way the asks reported are the desired replicas of
that forecast demand.

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
from typing import Literal

import numpy as np

from forecaster.backtest.metrics import Metrics, compute_metrics
from forecaster.backtest.simulator import Trajectory, simulate
from forecaster.exceptions import DataValidationError
from forecaster.metrics import coverage, pinball_loss
from forecaster.policies.autoscaler import hybrid_policy, reactive_policy
from forecaster.policies.base import Observation, QuantileForecast
from forecaster.policies.buffered import buffer_path
from forecaster.policies.hpa import HPAController
from forecaster.policies.reactive import ExtraMetric
from forecaster.resampling import DEFAULT_SIM_STEP
from forecaster.workload import WorkloadPolicy

AsksSource = Literal["recorded", "replayed"]
# Least share of the period's steps recorded asks must cover to be used instead of the replay.
ASKS_COVERAGE = 0.95


@dataclass(frozen=True)
class ShadowResult:
    """One workload's shadow replay, per simulation step of ``obs.sim_step``.

    Attributes
    ----------
    observation
        What was replayed: the demand, the period's start and the forecasts (the same input
        the backtest's policies read).
    actual, prewarm
        Trajectories of the actual and the hybrid fleet.
    actual_metrics, prewarm_metrics
        Their :class:`Metrics` (prices and SLO of the workload).
    asks
        prewarm's ask (desired replicas) in force at each step.
    asks_source
        ``"recorded"`` (as ``serve --shadow`` exported them) or ``"replayed"``.
    asks_coverage
        Share of the steps with a recorded ask (0 when none was recorded).
    measured
        Whether the actual fleet is measured (``False``: the simulated reactive HPA).
    added_hours, idle_hours
        See the module docstring.
    """

    observation: Observation
    actual: Trajectory
    prewarm: Trajectory
    actual_metrics: Metrics
    prewarm_metrics: Metrics
    asks: np.ndarray
    asks_source: AsksSource
    asks_coverage: float
    measured: bool
    added_hours: float
    idle_hours: float


def sim_step_for(data_step: int) -> float:
    """The backtest's 15 s simulation step when it divides ``data_step``, else the data step
    (the fleets are read per simulation step and must land on whole steps of a cell)."""
    return DEFAULT_SIM_STEP if data_step % DEFAULT_SIM_STEP == 0 else float(data_step)


def forecast_demand(forecast: QuantileForecast, policy: WorkloadPolicy, step: int) -> np.ndarray:
    """prewarm's forecast demand at each origin of ``forecast``, as
    :func:`forecaster.capacity.plan_capacity` answers it: the largest forecast of the
    policy's quantile over its lead window, at least 0.

    An origin without a finite forecast gives 0 (serving would answer the hold error there,
    and the HPA keeps its own proposal).
    """
    first, last = policy.horizon_range(step)
    rate = forecast.window_max(policy.tau, first, last)
    demand: np.ndarray = np.where(np.isfinite(rate), np.maximum(rate, 0.0), 0.0)
    return demand


def replayed_demand(obs: Observation, policy: WorkloadPolicy, times: np.ndarray) -> np.ndarray:
    """The forecast demand prewarm serves at ``times``: that of the latest origin observed
    (as the backtest's forecast policies read it)."""
    if obs.forecast is None:
        raise DataValidationError("the shadow replay needs forecasts: `Observation.forecast`")
    per_origin = forecast_demand(obs.forecast, policy, int(obs.data_step))
    origins = obs.latest_origin(times)
    if origins.min() < 0 or origins.max() >= len(per_origin):
        raise DataValidationError(
            f"forecasts cover origins 0..{len(per_origin) - 1}, the replay needs "
            f"{origins.min()}..{origins.max()}"
        )
    demand: np.ndarray = per_origin[origins]
    if policy.buffer_quantile > 0:  # the registered warm buffer, as serving raises it
        buffered = buffer_path(
            obs, times, policy.buffer_quantile, policy.hold, (policy.buffer, policy.buffer_level)
        )
        demand = np.fmax(demand, buffered)
    return demand


def recorded_asks(
    recorded: np.ndarray | None, replayed: np.ndarray
) -> tuple[np.ndarray | None, float]:
    """The recorded forecast demand to use, steps without a value taking the replayed one,
    and the share of steps recorded; ``None`` when it covers less than
    :data:`ASKS_COVERAGE`."""
    if recorded is None:
        return None, 0.0
    if len(recorded) != len(replayed):
        raise DataValidationError(
            f"the recorded forecast demand needs one value per simulation step ({len(replayed)}), "
            f"got {len(recorded)}"
        )
    present = np.isfinite(recorded)
    negative = np.flatnonzero(present & (np.nan_to_num(recorded) < 0))
    if len(negative):
        raise DataValidationError(
            f"the recorded forecast demand must be >= 0, got {float(recorded[negative[0]])!r} "
            f"at simulation step {negative[0]} of the period"
        )
    share = float(present.mean()) if len(recorded) else 0.0
    if share < ASKS_COVERAGE:
        return None, share
    demand: np.ndarray = np.where(present, recorded, replayed)
    return demand, share


def forecast_path(obs: Observation, policy: WorkloadPolicy, metric: ExtraMetric) -> np.ndarray:
    """Replicas per simulation step of the backtest's hybrid HPA reading prewarm's metric
    alone: ``metric`` is its value at each of the HPA's ticks and its ``averageValue``."""
    hybrid = hybrid_policy(policy)
    behavior = hybrid.hpa_behavior()
    spec = policy.spec
    values, target = metric
    controller = HPAController(behavior, spec.min_replicas, spec.max_replicas)
    # A controller that has been running holds its steady-state answer at the start (as
    # the backtest's HPA starts: ReactivePolicy.plan_with).
    initial = int(np.clip(math.ceil(values[0] / target), spec.min_replicas, spec.max_replicas))
    run = controller.run([values], [target], initial)
    held: np.ndarray = obs.hold_to_steps(run, behavior.sync_period_seconds)
    return held


def reactive_fleet(obs: Observation, policy: WorkloadPolicy) -> np.ndarray:
    """Replicas per simulation step of the backtest's reactive HPA at ``policy``'s settings
    over the period of ``obs`` (the cells before ``obs.start`` are its metric's history)."""
    fleet: np.ndarray = reactive_policy(policy).plan(obs)
    return fleet


def recorded_replicas(
    demand: np.ndarray, data_step: int, policy: WorkloadPolicy
) -> tuple[np.ndarray, np.ndarray]:
    """Billed and ready replicas per simulation step of the backtest's reactive HPA on
    ``demand``, from the trace's start, as kube-state-metrics scraped at that step would
    record them. The first cell is the metric's history: the HPA runs then what it runs at
    its first decision. Stands in for a cluster's recorded replicas where there is no
    cluster (tests, examples)."""
    sim = sim_step_for(data_step)
    obs = Observation(demand, float(data_step), 1, policy.spec, sim_step=sim)
    run = simulate(obs.sim_rate, reactive_policy(policy).plan(obs), policy.spec, step_seconds=sim)
    first = round(data_step / sim)
    billed = np.concatenate([np.repeat(run.asked[:1], first), run.asked])
    ready = np.concatenate([np.repeat(run.ready[:1], first), run.ready])
    return billed, ready


def replay(
    obs: Observation,
    policy: WorkloadPolicy,
    replicas: np.ndarray | None = None,
    ready: np.ndarray | None = None,
    *,
    asks: np.ndarray | None = None,
    seed: int = 0,
) -> ShadowResult:
    """Score the actual fleet and the hybrid fleet over the period of ``obs`` (see the
    module docstring).

    Parameters
    ----------
    obs
        Demand with the model's context before ``obs.start``, and the champion's forecasts.
    policy
        The workload's registered policy (capacity, cold start, prices, SLO, paths).
    replicas, ready
        The replicas the cluster ran and those ready, per simulation step of the period
        (``ready`` defaults to ``replicas``); ``None``: the simulated reactive HPA.
    asks
        The forecast demand ``serve --shadow`` exported, per simulation step (NaN where
        none was); ``None``: replayed from the forecasts.
    seed
        Seed of the cold-start draws.
    """
    spec = policy.spec
    rate = obs.sim_rate
    fleets = {"replicas": replicas, "ready": ready, "asks": asks}
    wrong = {k: len(v) for k, v in fleets.items() if v is not None and len(v) != len(rate)}
    if wrong:
        raise DataValidationError(
            f"the fleets need one value per simulation step of the period ({len(rate)}), "
            f"got {wrong}"
        )
    prewarm = _asks(obs, policy, asks)
    if replicas is None:
        billed = reactive_fleet(obs, policy)
        actual = simulate(rate, billed, spec, step_seconds=obs.sim_step, seed=seed)
    else:
        billed = np.asarray(replicas).astype(int)
        serving = np.asarray(replicas if ready is None else ready).astype(int)
        actual = _measured_run(rate, billed, serving, policy, obs.sim_step)
    desired = np.maximum(forecast_path(obs, policy, prewarm.metric), billed)
    fleet = simulate(rate, desired, spec, step_seconds=obs.sim_step, seed=seed)
    hours = obs.sim_step / 3600.0
    added = (actual.unserved > 0) & (fleet.ready > actual.ready)
    idle = (prewarm.asks < billed) & (rate <= prewarm.asks * spec.capacity_per_replica)
    idle &= actual.unserved == 0
    return ShadowResult(
        observation=obs,
        actual=actual,
        prewarm=fleet,
        actual_metrics=compute_metrics(actual, spec),
        prewarm_metrics=compute_metrics(fleet, spec),
        asks=prewarm.asks,
        asks_source=prewarm.source,
        asks_coverage=prewarm.coverage,
        measured=replicas is not None,
        added_hours=float(np.count_nonzero(added)) * hours,
        idle_hours=float(np.count_nonzero(idle)) * hours,
    )


@dataclass(frozen=True)
class _AsksInForce:
    """prewarm's asks per simulation step, and the metric the HPA reads them as."""

    asks: np.ndarray
    metric: ExtraMetric
    source: AsksSource
    coverage: float


def _asks(obs: Observation, policy: WorkloadPolicy, recorded: np.ndarray | None) -> _AsksInForce:
    """prewarm's forecast demand per simulation step, recorded where it covers the period
    (else replayed), the desired replicas it asks for, and what the HPA reads at its ticks
    (at the hybrid's forecast target)."""
    hybrid = hybrid_policy(policy)
    ticks = hybrid.ticks(obs)
    target = hybrid.forecast_target(policy.spec)
    replayed = replayed_demand(obs, policy, obs.step_times())
    used, share = recorded_asks(recorded, replayed)
    if used is None:
        metric = (replayed_demand(obs, policy, ticks), target)
        return _AsksInForce(
            obs.replicas_for(replayed, policy.forecast_u), metric, "replayed", share
        )
    tick_steps = np.floor((ticks - obs.start * obs.data_step) / obs.sim_step + 1e-9)
    metric = (used[tick_steps.astype(int)], target)
    return _AsksInForce(obs.replicas_for(used, policy.forecast_u), metric, "recorded", share)


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
