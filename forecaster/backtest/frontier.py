"""Frontier sweeps, cost at the SLO and the savings headline."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from forecaster.backtest.metrics import Metrics, compute_metrics
from forecaster.backtest.simulator import Trajectory, simulate
from forecaster.policies import Observation, make_policy, policy_class

Progress = Callable[[str, int, int], None]
# Recommended policy first, then what it is compared with.
RECOMMENDED = "hybrid"
BASELINES = {
    "vs_reactive": "reactive",
    "vs_static": "static",
    "vs_seasonal_naive": "seasonal-naive",
}
# Compared only when they ran: the HPA a workload says it runs instead of the one on demand.
OPTIONAL_BASELINES = {"vs_gpu_utilization": "gpu-utilization"}


def compared(ran: Collection[str]) -> dict[str, str]:
    """Savings key -> policy for a run of the policies ``ran``: every baseline, and the
    optional ones that ran.

    >>> compared(["hybrid", "gpu-utilization"])["vs_gpu_utilization"]
    'gpu-utilization'
    >>> "vs_gpu_utilization" in compared(["hybrid", "reactive"])
    False
    """
    return BASELINES | {key: name for key, name in OPTIONAL_BASELINES.items() if name in ran}


@dataclass(frozen=True)
class PolicyPoint:
    """One policy at one knob setting, and what it achieved.

    ``metrics`` covers every scored step; ``windows`` the same run measured on each named
    window of steps (the tuning and validation windows of :mod:`forecaster.backtest.tuning`).
    """

    policy: str
    params: dict[str, float]
    metrics: Metrics
    windows: dict[str, Metrics] = field(default_factory=dict)


def run_policy(
    obs: Observation, name: str, params: dict[str, float], seed: int
) -> tuple[Trajectory, Metrics]:
    """Plan ``name`` with ``params`` on ``obs``, simulate it, and measure its scored steps."""
    plan = make_policy(name, **params).plan(obs)
    trajectory = simulate(obs.sim_rate, plan, obs.spec, step_seconds=obs.sim_step, seed=seed)
    return trajectory, compute_metrics(trajectory, obs.spec, obs.scored)


def sweep(
    obs: Observation,
    names: Sequence[str],
    *,
    seed: int = 0,
    progress: Progress | None = None,
    windows: Mapping[str, np.ndarray] | None = None,
) -> dict[str, list[PolicyPoint]]:
    """Every policy of ``names`` at every point of its sweep grid, in grid order.

    ``windows`` names masks over the simulation steps; each point is also measured on each.

    Examples
    --------
    >>> import numpy as np
    >>> from forecaster.workload import WorkloadSpec
    >>> obs = Observation(np.full(40, 20.0), 60.0, 20, WorkloadSpec(capacity_per_replica=10.0))
    >>> [p.params for p in sweep(obs, ["static"])["static"]][:2]
    [{'headroom': 0.7}, {'headroom': 0.725}]
    """
    chosen = {name: policy_class(name).sweep_grid(obs.spec) for name in names}
    total = sum(len(grid) for grid in chosen.values())
    done = 0
    result: dict[str, list[PolicyPoint]] = {}
    for name, grid in chosen.items():
        points = []
        for params in grid:
            trajectory, metrics = run_policy(obs, name, params, seed)
            measured = {
                window: compute_metrics(trajectory, obs.spec, mask)
                for window, mask in (windows or {}).items()
            }
            points.append(PolicyPoint(name, dict(params), metrics, measured))
            done += 1
            if progress is not None:
                progress(name, done, total)
        result[name] = points
    return result


def cost_at_slo(points: Sequence[PolicyPoint], slo_unserved: float) -> PolicyPoint | None:
    """The cheapest point whose unserved fraction meets the SLO, or ``None``."""
    meeting = [p for p in points if p.metrics.unserved_fraction <= slo_unserved]
    return min(meeting, key=lambda p: p.metrics.cost, default=None)


def headline_point(points: Sequence[PolicyPoint], slo_unserved: float) -> tuple[PolicyPoint, bool]:
    """The cost-at-SLO point, or the point closest to the SLO when none meets it."""
    best = cost_at_slo(points, slo_unserved)
    if best is not None:
        return best, True
    return min(points, key=lambda p: (p.metrics.unserved_fraction, p.metrics.cost)), False


def headlines(
    frontier: Mapping[str, Sequence[PolicyPoint]], slo_unserved: float
) -> dict[str, tuple[PolicyPoint, bool]]:
    """Each policy's :func:`headline_point` on its frontier."""
    return {name: headline_point(points, slo_unserved) for name, points in frontier.items()}


def headline_costs(headline: Mapping[str, tuple[PolicyPoint, bool]]) -> dict[str, float | None]:
    """Each policy's cost at the SLO; ``None`` where no point of its sweep meets it."""
    return {
        name: (point.metrics.cost if meets else None) for name, (point, meets) in headline.items()
    }


def savings(costs: dict[str, float | None]) -> dict[str, float | None]:
    """Savings of the recommended policy at the SLO, as fractions; ``None`` where undefined.

    ``vs_X = 1 - cost(hybrid) / cost(X)``; ``oracle_gap = cost(hybrid) / cost(oracle) - 1``.

    Examples
    --------
    >>> savings({"hybrid": 75.0, "reactive": 100.0, "static": None, "oracle": 60.0})
    {'vs_reactive': 0.25, 'vs_static': None, 'vs_seasonal_naive': None, 'oracle_gap': 0.25}
    """
    ours = costs.get(RECOMMENDED)
    result: dict[str, float | None] = {}
    for key, name in compared(costs).items():
        theirs = costs.get(name)
        result[key] = None if ours is None or not theirs else 1.0 - ours / theirs
    oracle = costs.get("oracle")
    result["oracle_gap"] = None if ours is None or not oracle else ours / oracle - 1.0
    return result
