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

Capped demand
    A demand series that counts completions (requests served) rather than arrivals cannot
    exceed what the ready replicas serve: while the fleet is saturated it plateaus at ready
    replicas x capacity, and the forecast learns the fleet's ceiling instead of the demand.
    The series is *capped* when the per-replica load sits within ``tolerance`` of the
    capacity in at least ``min_share`` of the steps and (almost) never above it, where an
    arrival series would have crossed it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forecaster.exceptions import DataValidationError

DEFAULT_QUANTILE = 0.9
DEFAULT_MIN_STARTS = 5
DEFAULT_FALLBACK = 300.0
DEFAULT_LOAD_QUANTILE = 0.95
# A load within 5 % of the capacity counts as at the ceiling: rate() windows and a capacity
# estimated from the same series blur an exact plateau by a few percent.
DEFAULT_CAP_TOLERANCE = 0.05
# At the ceiling in at least 1 % of the steps (15 minutes a day at 1-minute steps) ...
DEFAULT_CAP_SHARE = 0.01
# ... and above it in fewer than a tenth as many: an arrival series crosses a ceiling it
# reaches, a completion series stays under it.
ABOVE_PER_CAPPED = 0.1


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


@dataclass(frozen=True)
class CapCheck:
    """Whether a demand series plateaus at ready replicas x capacity, and how often."""

    workload: str
    capacity: float
    """The capacity per replica the load was compared with."""
    steps: int
    """Steps with demand and at least one ready replica."""
    at_ceiling: int
    """Of those, the steps whose load per replica is within the tolerance of ``capacity``."""
    above: int
    """Of those, the steps whose load per replica is above the tolerance band."""
    plateau: float
    """Median load per replica over the steps at the ceiling (NaN when there are none)."""
    min_share: float

    @property
    def share(self) -> float:
        """Fraction of the steps at the ceiling: the share of time the series was capped."""
        return self.at_ceiling / self.steps if self.steps else 0.0

    @property
    def capped(self) -> bool:
        """Whether the series reaches the ceiling often and (almost) never crosses it."""
        return self.share >= self.min_share and self.above < ABOVE_PER_CAPPED * self.at_ceiling

    def describe(self) -> str:
        """One line for the log and the run: the plateau and the share of time capped."""
        if not self.capped:
            return (
                f"{self.workload}: demand is not capped at ready replicas x capacity "
                f"({self.share:.1%} of {self.steps} steps at the ceiling, {self.above} above it)"
            )
        return (
            f"{self.workload}: demand plateaus at ready replicas x capacity ({self.plateau:.4g} "
            f"per ready replica, capacity {self.capacity:.4g}) in {self.share:.1%} of "
            f"{self.steps} steps and exceeds it in {self.above}: the series looks like "
            "completions, which flatten when the fleet is saturated; forecasting it learns "
            "the fleet's ceiling, not the demand. Use an arrival-side query "
            "(docs/measured.md, 'Demand that is not capped')"
        )


def check_capped(
    workload: str,
    demand: np.ndarray,
    ready: np.ndarray,
    capacity: float,
    *,
    tolerance: float = DEFAULT_CAP_TOLERANCE,
    min_share: float = DEFAULT_CAP_SHARE,
) -> CapCheck:
    """Compare the load per ready replica with ``capacity`` (see the module docstring).

    Parameters
    ----------
    workload
        Named in errors and in :meth:`CapCheck.describe`.
    demand, ready
        Demand and ready replicas on one grid; steps where either is missing (NaN) or no
        replica is ready are left out.
    capacity
        Capacity per replica, in the demand's units (configured or measured).
    tolerance
        Relative distance from ``capacity`` that counts as at the ceiling.
    min_share
        Fraction of the steps at the ceiling from which the series counts as capped.

    Raises
    ------
    DataValidationError
        The series differ in length, or ``capacity`` is not a positive finite number.
    """
    demand = np.asarray(demand, dtype=float)
    ready = np.asarray(ready, dtype=float)
    if demand.shape != ready.shape:
        raise DataValidationError(
            f"workload {workload!r}: demand and ready replicas must share one grid, got "
            f"lengths {demand.size} and {ready.size}"
        )
    if not (np.isfinite(capacity) and capacity > 0):
        raise DataValidationError(
            f"workload {workload!r}: capacity per replica must be a positive finite number, "
            f"got {capacity!r}"
        )
    load = demand / np.where(ready > 0, ready, np.nan)
    load = load[np.isfinite(load)]
    ratio = load / capacity
    ceiling = np.abs(ratio - 1.0) <= tolerance
    plateau = float(np.median(load[ceiling])) if ceiling.any() else float("nan")
    return CapCheck(
        workload,
        float(capacity),
        int(load.size),
        int(ceiling.sum()),
        int((ratio > 1.0 + tolerance).sum()),
        plateau,
        min_share,
    )
