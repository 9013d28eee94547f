"""Cost and service metrics computed from a recorded :class:`Trajectory`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from forecaster.backtest.simulator import Trajectory
from forecaster.backtest.workload import WorkloadSpec


@dataclass(frozen=True)
class Metrics:
    """Outcome of one simulated run.

    Attributes
    ----------
    replica_hours
        Billed replica time (warm-up included) in hours.
    cost
        ``replica_hours * replica_hour_cost``.
    unserved_fraction
        Unserved work over arrived work (0 when nothing arrived).
    slo_violation_minutes
        Minutes whose unserved work exceeds ``slo_unserved_fraction`` of their arrivals.
    cold_starts
        Replicas asked for during the run.
    scale_events
        Steps at which the billed replica count changed.
    mean_utilization
        Served work over the work the ready replicas could have served.
    """

    replica_hours: float
    cost: float
    unserved_fraction: float
    slo_violation_minutes: float
    cold_starts: int
    scale_events: int
    mean_utilization: float

    def to_dict(self) -> dict[str, float | int]:
        """Plain ``dict`` for JSON."""
        return asdict(self)


def compute_metrics(trajectory: Trajectory, spec: WorkloadSpec) -> Metrics:
    """Summarize ``trajectory`` with the prices and SLO of ``spec``.

    Examples
    --------
    >>> from forecaster.backtest.simulator import simulate
    >>> spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=0)
    >>> run = simulate(np.full(240, 0.5), np.ones(240), spec)
    >>> compute_metrics(run, spec).replica_hours
    1.0
    """
    step = trajectory.step_seconds
    replica_hours = float(trajectory.asked.sum()) * step / 3600.0
    arrived = float(trajectory.arrivals.sum())
    unserved = float(trajectory.unserved.sum())
    capacity = float(trajectory.ready.sum()) * spec.capacity_per_replica * step
    return Metrics(
        replica_hours=replica_hours,
        cost=replica_hours * spec.replica_hour_cost,
        unserved_fraction=unserved / arrived if arrived > 0 else 0.0,
        slo_violation_minutes=_violation_minutes(trajectory, spec.slo_unserved_fraction),
        cold_starts=int(trajectory.launched.sum()),
        scale_events=int(np.count_nonzero(np.diff(trajectory.asked))),
        mean_utilization=float(trajectory.served.sum()) / capacity if capacity > 0 else 0.0,
    )


def _violation_minutes(trajectory: Trajectory, allowed_fraction: float) -> float:
    # Bucket steps into whole minutes when the step divides a minute; otherwise each step is
    # its own bucket, so the figure never depends on a bucket straddling two steps.
    step = trajectory.step_seconds
    per_bucket = int(60 // step) if step < 60 and 60 % step == 0 else 1
    n = len(trajectory.arrivals)
    pad = (-n) % per_bucket
    arrivals = np.pad(trajectory.arrivals, (0, pad)).reshape(-1, per_bucket).sum(axis=1)
    unserved = np.pad(trajectory.unserved, (0, pad)).reshape(-1, per_bucket).sum(axis=1)
    violated = unserved > allowed_fraction * arrivals
    return float(np.count_nonzero(violated)) * per_bucket * step / 60.0
