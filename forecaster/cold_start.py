"""Measured cold start and capacity per replica: estimators over observed series.

Two numbers every workload needs are rarely known by its owners: how long a new replica
takes from being asked for to serving (its **cold start**) and how much demand one warm
replica serves while the latency SLO holds (its **capacity per replica**). Both can be read
from what the cluster already records; these estimators turn the observations into the
numbers, with no I/O (:mod:`training.measured` queries Prometheus for them).

Cold start
    One observation per pod: its ready time minus its creation time (node wait, image pull
    and model load together). The estimate is a quantile of those durations (numpy's
    default, linear interpolation between order statistics). Fewer than ``min_starts``
    observations fall back to a configured value, and the estimate says so.

Capacity per replica
    With a queue length: the per-replica load (demand / ready replicas) at which the queue
    starts to grow, found as the threshold that best separates the steps where the queue grew
    from those where it did not (the fewest steps on the wrong side). Without one: a quantile
    of the per-replica load the workload ran at, which is what its replicas were seen to
    sustain, not necessarily what they could.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forecaster.exceptions import DataValidationError

DEFAULT_QUANTILE = 0.9
DEFAULT_MIN_STARTS = 5
DEFAULT_FALLBACK = 300.0
DEFAULT_LOAD_QUANTILE = 0.95


@dataclass(frozen=True)
class ColdStartEstimate:
    """The distribution of observed cold starts and the value a workload plans with."""

    workload: str
    durations: np.ndarray
    """Seconds from creation to ready, one per pod, sorted."""
    quantile: float
    seconds: float
    """The ``quantile`` of :attr:`durations`, or :attr:`fallback` when too few were seen."""
    fallback: float
    min_starts: int

    @property
    def measured(self) -> bool:
        """Whether :attr:`seconds` comes from the observations (not the fallback)."""
        return len(self.durations) >= self.min_starts

    @property
    def summary(self) -> dict[str, float]:
        """Count, median, P90 and max of the observations (NaN when there are none)."""
        d = self.durations
        empty = len(d) == 0
        return {
            "count": float(len(d)),
            "median": float("nan") if empty else float(np.quantile(d, 0.5)),
            "p90": float("nan") if empty else float(np.quantile(d, 0.9)),
            "max": float("nan") if empty else float(d.max()),
        }

    def describe(self) -> str:
        """One line for the log and the run: what was seen and what is used."""
        s = self.summary
        seen = (
            f"{int(s['count'])} starts (median {s['median']:.0f} s, P90 {s['p90']:.0f} s, "
            f"max {s['max']:.0f} s)"
            if len(self.durations)
            else "no starts"
        )
        if self.measured:
            return (
                f"{self.workload}: cold start {self.seconds:.0f} s = q{self.quantile:g} of {seen}"
            )
        return (
            f"{self.workload}: cold start falls back to {self.fallback:.0f} s: {seen}, fewer "
            f"than the {self.min_starts} needed to measure it"
        )


def estimate_cold_start(
    workload: str,
    created: np.ndarray,
    ready: np.ndarray,
    *,
    quantile: float = DEFAULT_QUANTILE,
    min_starts: int = DEFAULT_MIN_STARTS,
    fallback: float = DEFAULT_FALLBACK,
) -> ColdStartEstimate:
    """The ``quantile`` of ``ready - created`` over the pods observed.

    Parameters
    ----------
    workload
        Named in errors and in :meth:`ColdStartEstimate.describe`.
    created, ready
        Unix seconds of each pod's creation and readiness, paired by position.
    quantile
        In (0, 1).
    min_starts
        Fewer observations use ``fallback`` instead.
    fallback
        Seconds used when too few pods were seen.

    Raises
    ------
    DataValidationError
        The arrays differ in length, hold a non-finite value, or a pod is ready before it
        was created (the first such pod is named by position and values).
    """
    created = np.asarray(created, dtype=float)
    ready = np.asarray(ready, dtype=float)
    if created.shape != ready.shape or created.ndim != 1:
        raise DataValidationError(
            f"workload {workload!r}: creation and ready times must pair one to one, got "
            f"{created.size} and {ready.size}"
        )
    durations = ready - created
    bad = np.flatnonzero(~np.isfinite(durations) | (durations < 0))
    if bad.size:
        i = int(bad[0])
        raise DataValidationError(
            f"workload {workload!r}: pod {i} has creation time {created[i]!r} and ready time "
            f"{ready[i]!r}; a cold start must be a finite, non-negative number of seconds"
        )
    durations = np.sort(durations)
    seconds = float(np.quantile(durations, quantile)) if durations.size >= min_starts else fallback
    return ColdStartEstimate(workload, durations, quantile, seconds, fallback, min_starts)


@dataclass(frozen=True)
class CapacityEstimate:
    """The demand one warm replica serves, as estimated from demand, replicas and queue."""

    workload: str
    per_replica: float
    method: str
    """``queue growth`` (a queue was read) or ``load quantile`` (it was not)."""
    steps: int
    """Steps with demand and at least one ready replica that the estimate used."""
    growing: int
    """Of those, the steps where the queue grew (0 without a queue)."""

    def describe(self, configured: float | None = None) -> str:
        """One line: the estimate, how it was made, and the configured value beside it."""
        beside = "" if configured is None else f" (configured: {configured:g})"
        growth = f", the queue grew in {self.growing}" if self.method == "queue growth" else ""
        return (
            f"{self.workload}: capacity per replica {self.per_replica:.4g} by {self.method} "
            f"over {self.steps} steps{growth}{beside}"
        )


def estimate_capacity(
    workload: str,
    demand: np.ndarray,
    ready: np.ndarray,
    queue: np.ndarray | None = None,
    *,
    quantile: float = DEFAULT_LOAD_QUANTILE,
) -> CapacityEstimate:
    """The per-replica load at which the queue starts to grow, or a quantile of the load.

    Parameters
    ----------
    workload
        Named in errors.
    demand, ready
        Demand and ready replicas on one grid; steps where either is missing (NaN) or no
        replica is ready are left out.
    queue
        Requests waiting on the same grid (e.g. ``sum(vllm:num_requests_waiting)``); step
        ``t`` grew when ``queue[t + 1] > queue[t]``, and is judged by the load at ``t``.
    quantile
        Without ``queue``: the quantile of the per-replica load used, in (0, 1).

    Raises
    ------
    DataValidationError
        The series differ in length, no step is usable, or with a queue it never grew or
        never stayed flat (then the load at which it grows is not observed).
    """
    demand = np.asarray(demand, dtype=float)
    ready = np.asarray(ready, dtype=float)
    series = [demand, ready] if queue is None else [demand, ready, np.asarray(queue, float)]
    if len({s.shape for s in series}) != 1:
        raise DataValidationError(
            f"workload {workload!r}: demand, ready replicas and queue must share one grid, "
            f"got lengths {[s.size for s in series]}"
        )
    load = demand / np.where(ready > 0, ready, np.nan)
    if queue is None:
        usable = np.isfinite(load)
        if not usable.any():
            raise DataValidationError(
                f"workload {workload!r}: no step has both demand and a ready replica"
            )
        value = float(np.quantile(load[usable], quantile))
        return CapacityEstimate(workload, value, "load quantile", int(usable.sum()), 0)
    waiting = np.asarray(queue, dtype=float)
    change = waiting[1:] - waiting[:-1]
    load = load[:-1]
    usable = np.isfinite(load) & np.isfinite(change)
    grew = change[usable] > 0
    x = load[usable]
    if grew.all() or not grew.any():
        raise DataValidationError(
            f"workload {workload!r}: the queue grew in {int(grew.sum())} of {x.size} usable "
            "steps; estimating capacity needs steps where it grew and steps where it did not"
        )
    return CapacityEstimate(
        workload, _growth_threshold(x, grew), "queue growth", int(x.size), int(grew.sum())
    )


def _growth_threshold(load: np.ndarray, grew: np.ndarray) -> float:
    """The load that best splits growing steps (above) from the others (below).

    Each candidate cut lies between two consecutive sorted loads; its error is the number of
    growing steps at or below it plus the number of others above it. The best cut's midpoint
    is returned; ties take the middle of the tied cuts, so noise on one side does not pull
    the estimate to the edge of the gap.
    """
    order = np.argsort(load, kind="stable")
    x, g = load[order], grew[order]
    # errors[k]: the cut after the k-th smallest load (k = 0 .. n-2).
    growing_below = np.cumsum(g)[:-1]
    flat_above = (~g).sum() - np.cumsum(~g)[:-1]
    errors = growing_below + flat_above
    best = np.flatnonzero(errors == errors.min())
    k = int(best[len(best) // 2])
    return float((x[k] + x[k + 1]) / 2)
