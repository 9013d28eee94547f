"""Reach: the same rungs past the cautious end of every open-ended grid.

On bursty traces the SLO can take more margin than the fine part of a grid reaches: bursts
larger than any quantile foresees. Each policy whose margin is open-ended then gets the same
four rungs, the path that carries its margin sized at utilization ``u`` of :data:`REACH`
(4x to 10x what that path sizes for), so none meets the SLO, or misses it, for having been
given less reach than another. Tuning picks a rung only where no cheaper setting holds the
tuning rule: on the bursty traces of ``benchmarks/backtest_savings.py``, on none of the
smooth ones.

A policy that adds a path beside the HPA's own has two paths that can carry margin, so it
gets the rungs on both: its own path's, and the HPA's (:func:`hpa_rungs`: the reactive
path at ``u``, the added path at its least margin). Its grid then holds every rung the HPA
alone has, and no such policy costs more than the HPA for want of one. Measured before they
were added: on twitter and steady-diurnal, where the HPA's rung is the cheapest setting that
holds the SLO, hybrid's own rung cost 53% and 11% more (``benchmarks/backtest_savings.py``).
The HPA's utilizations between its reactive path beside a forecast and the rungs (0.7 to
0.3) are left out on purpose: measured beside every path, they closed hybrid's gap to the HPA
on twitter at a 2-minute cold start but cost it the SLO in two other cells of the cold-start
sweep, as cheaper settings passed a tuning half that the second half broke (README,
``benchmarks/results/cold_start_sweep_hpa_ladder.md``).

``keda-cron`` and ``buffered`` size from quantiles that end at the training window's
maximum: their own path has no rungs past the most cautious setting their rule has, only
the HPA's. ``static`` has its own four rungs past twice the training peak
(:mod:`forecaster.policies.static`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

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


def hpa_rungs(beside: Mapping[str, float] | None = None) -> Grid:
    """The HPA's own rungs: its target utilization at each rung of :data:`REACH`, in the
    controller's default tolerance band, with the settings of a path ``beside`` it.

    Examples
    --------
    >>> hpa_rungs()[0]
    {'target_utilization': 0.25, 'tolerance': 0.1}
    >>> hpa_rungs({"margin": 0.0})[-1]
    {'margin': 0.0, 'target_utilization': 0.1, 'tolerance': 0.1}
    """
    path = dict(beside or {})
    return rungs(lambda u: path | {"target_utilization": u, "tolerance": BESIDE["tolerance"]})
