"""Time-stepped cluster: replicas are asked, warm up, serve a FIFO queue, and are billed.

Model, per simulation step ``i`` of ``step_seconds`` (default 15 s):

1. replicas whose cold start has elapsed become ready;
2. the policy's desired count for step ``i`` is applied: new replicas are asked (each draws
   its cold start from the workload's :class:`~forecaster.backtest.workload.ColdStart`,
   rounded up to whole steps), or replicas are removed, pending ones first (latest to become
   ready first, as a ReplicaSet deletes unscheduled pods first), then ready ones;
3. the ready capacity ``ready * capacity_per_replica * step_seconds`` serves the queue oldest
   work first (backlog, then this step's arrivals);
4. work that has waited ``slo_latency_seconds`` (rounded down to whole steps, at least one
   step) and is still queued is dropped and counted as unserved.

Every asked replica is billed from its ask, warm-up included, until it is removed. The
cluster starts warm: ``initial_ready`` replicas (default: the first desired count) are ready
at step 0. The only randomness is the cold-start draw, from ``np.random.default_rng(seed)``,
so a run is deterministic for a seed.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from forecaster.backtest.workload import WorkloadSpec
from forecaster.exceptions import ConfigError, DataValidationError

DEFAULT_SIM_STEP = 15.0
# Work below this is rounding noise (units x seconds), not a queue.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Trajectory:
    """Per-step record of one simulated run; all arrays have one entry per step.

    Attributes
    ----------
    step_seconds
        Length of a simulation step.
    arrivals
        Work (demand units x seconds) arriving during the step.
    asked
        Replicas billed during the step: ready plus warming up.
    ready
        Replicas serving during the step.
    launched
        Replicas asked at the step (cold starts begun).
    served
        Work served during the step.
    unserved
        Work dropped at the end of the step because it waited past the SLO latency.
    backlog
        Work still queued at the end of the step.
    """

    step_seconds: float
    arrivals: np.ndarray
    asked: np.ndarray
    ready: np.ndarray
    launched: np.ndarray
    served: np.ndarray
    unserved: np.ndarray
    backlog: np.ndarray


def resample_demand(
    demand: np.ndarray, data_step: float, sim_step: float = DEFAULT_SIM_STEP
) -> np.ndarray:
    """Demand rate per simulation step from a rate per data step.

    Demand is **held** (piecewise constant) within each data step; a simulation step that
    straddles data steps gets the time-weighted mean. Total work is conserved exactly.

    Parameters
    ----------
    demand
        Rate (units per second) per data step; value ``k`` covers
        ``[k * data_step, (k + 1) * data_step)``. Must be finite and >= 0.
    data_step, sim_step
        Step lengths in seconds.

    Returns
    -------
    numpy.ndarray
        Rate per simulation step, ``ceil(len(demand) * data_step / sim_step)`` entries.

    Examples
    --------
    >>> resample_demand(np.array([1.0, 3.0]), 60, 30).tolist()
    [1.0, 1.0, 3.0, 3.0]
    """
    demand = np.asarray(demand, dtype=float)
    if demand.ndim != 1 or not np.all(np.isfinite(demand)) or np.any(demand < 0):
        raise DataValidationError(
            "`demand` must be a 1-D array of finite values >= 0 "
            f"(fill gaps before simulating), got shape {demand.shape}"
        )
    if data_step <= 0 or sim_step <= 0:
        raise ConfigError(
            f"`data_step` and `sim_step` must be > 0, got {data_step!r} and {sim_step!r}"
        )
    if data_step % sim_step == 0:  # the usual case, exact without integrating
        return np.repeat(demand, int(data_step // sim_step))
    span = len(demand) * data_step
    cumulative = np.concatenate([[0.0], np.cumsum(demand * data_step)])
    edges = np.minimum(np.arange(math.ceil(span / sim_step) + 1) * sim_step, span)
    work = np.diff(np.interp(edges, np.arange(len(demand) + 1) * data_step, cumulative))
    return work / sim_step


def simulate(
    rate: np.ndarray,
    desired: np.ndarray,
    spec: WorkloadSpec,
    *,
    step_seconds: float = DEFAULT_SIM_STEP,
    seed: int = 0,
    initial_ready: int | None = None,
) -> Trajectory:
    """Replay ``rate`` through a cluster that follows ``desired``.

    Parameters
    ----------
    rate
        Demand rate per simulation step (see :func:`resample_demand`).
    desired
        Desired replica count per simulation step, as a policy produced it.
    spec
        Capacity per replica, cold start and SLO latency of the workload.
    step_seconds
        Simulation step in seconds.
    seed
        Seed of the cold-start draws.
    initial_ready
        Warm replicas at step 0; defaults to ``desired[0]``.

    Returns
    -------
    Trajectory
    """
    rate = np.asarray(rate, dtype=float)
    desired = np.asarray(desired)
    if desired.shape != rate.shape:
        raise DataValidationError(
            f"`desired` must have one entry per step of `rate` ({rate.shape}), got {desired.shape}"
        )
    if len(desired) and (desired.min() < 0 or not np.all(desired == np.round(desired))):
        raise DataValidationError("`desired` must hold whole numbers >= 0")
    arrivals = rate * step_seconds
    asked, ready, launched = _run_replicas(
        desired.astype(int).tolist(),
        spec,
        step_seconds,
        np.random.default_rng(seed),
        int(desired[0]) if initial_ready is None and len(desired) else int(initial_ready or 0),
    )
    capacity = np.asarray(ready, dtype=float) * (spec.capacity_per_replica * step_seconds)
    patience = max(1, int(spec.slo_latency_seconds // step_seconds))
    served, unserved, backlog = _run_queue(arrivals.tolist(), capacity.tolist(), patience)
    return Trajectory(
        step_seconds=float(step_seconds),
        arrivals=arrivals,
        asked=np.asarray(asked, dtype=int),
        ready=np.asarray(ready, dtype=int),
        launched=np.asarray(launched, dtype=int),
        served=np.asarray(served),
        unserved=np.asarray(unserved),
        backlog=np.asarray(backlog),
    )


def _run_replicas(
    desired: list[int],
    spec: WorkloadSpec,
    step_seconds: float,
    rng: np.random.Generator,
    initial_ready: int,
) -> tuple[list[int], list[int], list[int]]:
    # Plain Python lists and ints: this loop runs once per step, and numpy scalar overhead
    # would dominate it.
    cold_start = spec.cold_start_model
    n = len(desired)
    asked, ready_out, launched = [0] * n, [0] * n, [0] * n
    pending: list[int] = []  # steps at which pending replicas become ready, sorted
    ready = initial_ready
    for i in range(n):
        while pending and pending[0] <= i:
            pending.pop(0)
            ready += 1
        target = desired[i]
        total = ready + len(pending)
        if target > total:
            new = target - total
            launched[i] = new
            for seconds in cold_start.sample(rng, new).tolist():
                ready_at = i + math.ceil(seconds / step_seconds - 1e-9)
                if ready_at <= i:
                    ready += 1
                else:
                    bisect.insort(pending, ready_at)
        elif target < total:
            excess = total - target
            drop_pending = min(excess, len(pending))
            if drop_pending:
                del pending[len(pending) - drop_pending :]
            ready -= excess - drop_pending
        asked[i] = ready + len(pending)
        ready_out[i] = ready
    return asked, ready_out, launched


def _run_queue(
    arrivals: list[float], capacity: list[float], patience: int
) -> tuple[list[float], list[float], list[float]]:
    n = len(arrivals)
    served_out, unserved_out, backlog_out = [0.0] * n, [0.0] * n, [0.0] * n
    queue: deque[list[float]] = deque()  # [arrival step, remaining work], oldest first
    queued = 0.0
    for i in range(n):
        cap = capacity[i]
        work = arrivals[i]
        if not queue and work <= cap + _EPSILON:  # the common case: served on arrival
            served_out[i] = work
            continue
        queue.append([float(i), work])
        queued += work
        served = 0.0
        while queue and cap > 0.0:
            bucket = queue[0]
            take = bucket[1] if bucket[1] <= cap else cap
            bucket[1] -= take
            cap -= take
            served += take
            if bucket[1] <= _EPSILON:
                queue.popleft()
        queued -= served
        if queue and queue[0][0] <= i - patience + 1:
            dropped = queue.popleft()[1]
            unserved_out[i] = dropped
            queued -= dropped
        served_out[i] = served
        backlog_out[i] = queued if queued > _EPSILON else 0.0
    return served_out, unserved_out, backlog_out
