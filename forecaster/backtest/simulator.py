"""Time-stepped cluster: replicas are asked, warm up, serve a FIFO queue, and are billed.

Model, per simulation step ``i`` of ``step_seconds`` (default 15 s):

1. replicas whose cold start has elapsed become ready;
2. the policy's desired count for step ``i`` is applied: new replicas are asked (each draws
   its cold start from the workload's :class:`~forecaster.workload.ColdStart`,
   rounded up to whole steps), or replicas are removed, pending ones first (latest to become
   ready first, as a ReplicaSet deletes unscheduled pods first), then ready ones;
3. the ready capacity, ``ready * capacity_per_replica`` per second, serves the queue oldest
   work first (backlog, then this step's arrivals);
4. work still queued ``slo_latency_seconds`` after it arrived is dropped and counted as
   unserved, at the moment it passes that deadline.

The queue is a fluid: within a step, work arrives at a constant rate and is served at a
constant rate, so the deadline is exact at any step size, a multiple of the SLO latency or
not. Because service is first in, first out and only the oldest work expires, what is queued
is always exactly the work that arrived after some instant, so the queue's whole state is
one number, the *head*: the cumulative work that has left it, served or dropped. Over an
interval where arrivals, service and the arrivals reaching the deadline all have constant
rates, the head moves at the service rate, clamped between the work that has passed the
deadline and the work that has arrived (a straight line reflected off two straight lines is
their clamp). A step holds at most two such intervals: the arrivals reaching the deadline
change rate once, when the deadline crosses a step boundary. Replayed at 1-second steps with
a whole number of seconds of SLO latency, this is exactly a per-second FIFO that serves each
second's capacity oldest first, then drops the work that arrived ``slo_latency_seconds`` or
more seconds before the second's end.

Every asked replica is billed from its ask, warm-up included, until it is removed. The
cluster starts warm: ``initial_ready`` replicas (default: the first desired count) are ready
at step 0. The only randomness is the cold-start draw, from ``np.random.default_rng(seed)``,
so a run is deterministic for a seed.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass

import numpy as np

from forecaster.exceptions import DataValidationError
from forecaster.resampling import DEFAULT_SIM_STEP
from forecaster.workload import MAX_REPLICAS, WorkloadSpec

# Work below this is rounding noise (units x seconds), not a queue.
_EPSILON = 1e-9
# The queue is tracked in cumulative work, whose rounding grows with the total: a backlog
# below this fraction of the work arrived so far is noise too.
_RELATIVE_NOISE = 1e-12


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
        Work dropped during the step because it waited past the SLO latency.
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
        Demand rate per simulation step (see :func:`forecaster.resampling.resample_demand`).
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
    _check_replicas(desired, initial_ready)
    arrivals = rate * step_seconds
    asked, ready, launched = _run_replicas(
        desired.astype(int).tolist(),
        spec,
        step_seconds,
        np.random.default_rng(seed),
        int(desired[0]) if initial_ready is None and len(desired) else int(initial_ready or 0),
    )
    capacity = np.asarray(ready, dtype=float) * (spec.capacity_per_replica * step_seconds)
    served, unserved, backlog = _run_queue(
        arrivals.tolist(), capacity.tolist(), spec.slo_latency_seconds / step_seconds
    )
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


def _check_replicas(desired: np.ndarray, initial_ready: int | None) -> None:
    """Whole counts in [0, MAX_REPLICAS]: the simulator keeps one entry per pending replica."""
    with np.errstate(invalid="ignore"):
        bad = ~((desired >= 0) & (desired <= MAX_REPLICAS) & (desired == np.round(desired)))
    if bad.any():
        step = int(np.flatnonzero(bad)[0])
        raise DataValidationError(
            f"`desired` must hold whole numbers in [0, {MAX_REPLICAS:,}]; step {step} of "
            f"{len(desired)} asks for {desired[step]!s:.40} ({int(bad.sum())} steps out of range)"
        )
    if initial_ready is not None and not 0 <= initial_ready <= MAX_REPLICAS:
        raise DataValidationError(
            f"`initial_ready` must be in [0, {MAX_REPLICAS:,}], got {initial_ready!s:.40}"
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
    arrivals: list[float], capacity: list[float], deadline_steps: float
) -> tuple[list[float], list[float], list[float]]:
    # Time is in steps here. `arrived[k]` is the work arrived before step k; the work arrived
    # before time x inside step k is arrived[k] + arrivals[k] * (x - k). `head` is the work
    # that has left the queue (see the module docstring).
    n = len(arrivals)
    served_out, unserved_out, backlog_out = [0.0] * n, [0.0] * n, [0.0] * n
    arrived = [0.0, *itertools.accumulate(arrivals)]
    noise = _EPSILON + _RELATIVE_NOISE * arrived[-1]
    whole, part = divmod(deadline_steps, 1.0)
    behind = int(whole)  # the deadline reaches into step i - behind during step i
    head = 0.0
    for i in range(n):
        cap = capacity[i]
        if arrived[i] - head <= noise and arrivals[i] <= cap + _EPSILON:
            # the common case: nothing queued and enough capacity, served on arrival
            served_out[i] = arrived[i + 1] - head
            head = arrived[i + 1]
            continue
        # Work arrived before time i + part - deadline, then before i + 1 - deadline.
        oldest = i - behind
        expired_mid = arrived[oldest] if oldest >= 0 else 0.0
        expired_end = expired_mid + arrivals[oldest] * (1.0 - part) if oldest >= 0 else 0.0
        head, served, dropped = _advance(
            head, cap * part, expired_mid, arrived[i] + arrivals[i] * part
        )
        head, served_late, dropped_late = _advance(
            head, cap * (1.0 - part), expired_end, arrived[i + 1]
        )
        served_out[i] = served + served_late
        unserved_out[i] = dropped + dropped_late
        backlog = arrived[i + 1] - head
        backlog_out[i] = backlog if backlog > noise else 0.0
    return served_out, unserved_out, backlog_out


def _advance(
    head: float, work: float, expired: float, arrived: float
) -> tuple[float, float, float]:
    """Serve ``work`` from ``head`` over an interval with constant rates.

    ``expired`` and ``arrived`` are the cumulative work past the deadline and arrived at the
    interval's end. Returns the new head, the work served and the work dropped.
    """
    reach = head + work
    if reach >= arrived:  # the queue empties: the rest of the interval serves on arrival
        return arrived, arrived - head, 0.0
    if reach < expired:  # service fell behind the deadline: what it skipped is lost
        return expired, work, expired - reach
    return reach, work, 0.0
