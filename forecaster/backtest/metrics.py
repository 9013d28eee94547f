"""Cost and service metrics computed from a recorded :class:`Trajectory`."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from forecaster.backtest.simulator import Trajectory
from forecaster.exceptions import DataValidationError
from forecaster.workload import WorkloadSpec


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


def compute_metrics(
    trajectory: Trajectory, spec: WorkloadSpec, scored: np.ndarray | None = None
) -> Metrics:
    """Summarize ``trajectory`` with the prices and SLO of ``spec``.

    Parameters
    ----------
    trajectory
        The simulated run.
    spec
        Prices and SLO.
    scored
        Per step, whether it counts (``False`` inside a gap of the data, which the
        simulation ran through); ``None`` counts every step. Work is counted in the step it
        arrives, is served or is dropped, and a scale event in the step it happens.

    Examples
    --------
    >>> from forecaster.backtest.simulator import simulate
    >>> spec = WorkloadSpec(capacity_per_replica=1.0, cold_start=0)
    >>> run = simulate(np.full(240, 0.5), np.ones(240), spec)
    >>> compute_metrics(run, spec).replica_hours
    1.0
    >>> compute_metrics(run, spec, scored=np.arange(240) < 120).replica_hours
    0.5
    """
    n = len(trajectory.arrivals)
    keep = np.ones(n, dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
    if keep.shape != (n,):
        raise DataValidationError(
            f"`scored` must have one entry per step of the trajectory ({n}), got {keep.shape}"
        )
    step = trajectory.step_seconds
    replica_hours = float(trajectory.asked[keep].sum()) * step / 3600.0
    arrivals = np.where(keep, trajectory.arrivals, 0.0)
    unserved = np.where(keep, trajectory.unserved, 0.0)
    arrived = float(arrivals.sum())
    capacity = float(trajectory.ready[keep].sum()) * spec.capacity_per_replica * step
    changes = np.diff(trajectory.asked) != 0
    return Metrics(
        replica_hours=replica_hours,
        cost=replica_hours * spec.replica_hour_cost,
        unserved_fraction=float(unserved.sum()) / arrived if arrived > 0 else 0.0,
        slo_violation_minutes=_violation_minutes(
            arrivals, unserved, step, spec.slo_unserved_fraction
        ),
        cold_starts=int(trajectory.launched[keep].sum()),
        scale_events=int(np.count_nonzero(changes & keep[1:])),
        mean_utilization=float(trajectory.served[keep].sum()) / capacity if capacity > 0 else 0.0,
    )


def _violation_minutes(
    arrivals: np.ndarray, unserved: np.ndarray, step: float, allowed_fraction: float
) -> float:
    # Bucket steps into whole minutes when the step divides a minute; otherwise each step is
    # its own bucket, so the figure never depends on a bucket straddling two steps.
    per_bucket = int(60 // step) if step < 60 and 60 % step == 0 else 1
    pad = (-len(arrivals)) % per_bucket
    arrived = np.pad(arrivals, (0, pad)).reshape(-1, per_bucket).sum(axis=1)
    lost = np.pad(unserved, (0, pad)).reshape(-1, per_bucket).sum(axis=1)
    violated = lost > allowed_fraction * arrived
    return float(np.count_nonzero(violated)) * per_bucket * step / 60.0
