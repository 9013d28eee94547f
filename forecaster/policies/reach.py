"""Reach: the same rungs past the cautious end of every open-ended grid.

On bursty traces the SLO can take more margin than the fine part of a grid reaches: bursts
larger than any quantile foresees. Each policy whose margin is open-ended then gets the same
four rungs, the path that carries its margin sized at utilization ``u`` of :data:`REACH`
(4x to 10x what that path sizes for), so none meets the SLO, or misses it, for having been
given less reach than another. Tuning picks a rung only where no cheaper setting holds the
tuning rule: on the bursty traces of ``benchmarks/backtest_savings.py``, on none of the
smooth ones.

``keda-cron`` and ``buffered`` size from quantiles that end at the training window's
maximum: their grids already end at the most cautious setting their rule has. ``static``
has its own four rungs past twice the training peak (:mod:`forecaster.policies.static`).
"""

from __future__ import annotations

from collections.abc import Callable

from forecaster.policies.base import Grid

REACH: tuple[float, ...] = (0.25, 0.2, 0.15, 0.1)
# A forecast path's rung runs beside the reactive path at its hottest, with the HPA's own
# tolerance band: the rung carries all the margin.
BESIDE = {"target_utilization": 1.0, "tolerance": 0.1}


def rungs(setting: Callable[[float], dict[str, float]]) -> Grid:
    """A policy's settings at each rung utilization of :data:`REACH`.

    Examples
    --------
    >>> rungs(lambda u: {"target_utilization": u})[-1]
    {'target_utilization': 0.1}
    """
    return tuple(setting(u) for u in REACH)
