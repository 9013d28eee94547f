"""Figures of a backtest; matplotlib is imported only when a figure is drawn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from forecaster.backtest.frontier import PolicyPoint
from forecaster.backtest.simulator import Trajectory

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DAY = 86400.0


def legend_below(figure: Figure, axes: Sequence[Axes]) -> None:
    """One legend under the panels of ``figure`` for every label drawn on any of ``axes``
    (a marker kind may appear on one panel only), each label once, in order of appearance."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=7)


def spike_window(rate: np.ndarray, step_seconds: float, span: float = DAY) -> slice:
    """Steps of a ``span`` centred on the largest demand, shifted to fit the trace."""
    width = min(len(rate), max(1, int(span // step_seconds)))
    first = int(np.argmax(rate)) - width // 2
    first = min(max(first, 0), len(rate) - width)
    return slice(first, first + width)


def capacity_figure(
    runs: Mapping[str, Trajectory], capacity_per_replica: float, title: str = ""
) -> Figure:
    """Demand vs ready capacity per policy over a day around the largest spike."""
    # A bare Figure draws without a GUI backend and leaves pyplot's global state alone, so the
    # same code serves the CLI, tests and notebooks.
    from matplotlib.figure import Figure

    names = list(runs)
    figure = Figure(figsize=(11, 2.2 * len(names) + 0.6), layout="constrained")
    axes = figure.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    first = runs[names[0]]
    window = spike_window(first.arrivals, first.step_seconds)
    hours = np.arange(window.start, window.stop) * first.step_seconds / 3600.0
    for axis, name in zip(axes, names, strict=True):
        run = runs[name]
        demand = run.arrivals[window] / run.step_seconds
        axis.fill_between(hours, demand, step="post", color="0.8", label="demand")
        capacity = run.ready[window] * capacity_per_replica
        axis.step(hours, capacity, where="post", color="C0", label="ready capacity")
        lost = run.unserved[window] > 0
        axis.plot(hours[lost], demand[lost], "x", color="C3", markersize=3, label="unserved")
        axis.set_ylabel(name)
    axes[0].legend(loc="upper left", fontsize="small", ncols=3)
    axes[-1].set_xlabel("hours from the evaluation start")
    figure.suptitle(title or "Demand and ready capacity around the largest spike")
    return figure


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (unserved, cost) points no other point beats on both, by increasing unserved.

    >>> pareto_front([(0.1, 5.0), (0.0, 9.0), (0.2, 6.0), (0.3, 1.0)])
    [(0.0, 9.0), (0.1, 5.0), (0.3, 1.0)]
    """
    front: list[tuple[float, float]] = []
    for unserved, cost in sorted(points):
        if not front or cost < front[-1][1]:
            front.append((unserved, cost))
    return front


def frontier_figure(frontier: Mapping[str, list[PolicyPoint]], slo_unserved: float) -> Figure:
    """Cost vs unserved fraction as each policy's knob is swept, with the SLO line: every
    setting faintly, each policy's efficient settings joined."""
    # A bare Figure draws without a GUI backend and leaves pyplot's global state alone, so the
    # same code serves the CLI, tests and notebooks.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    axis = figure.subplots()
    for index, (name, points) in enumerate(frontier.items()):
        color = f"C{index}"
        unserved = [max(p.metrics.unserved_fraction, 1e-7) for p in points]
        cost = [p.metrics.cost for p in points]
        axis.plot(unserved, cost, "o", color=color, markersize=3, alpha=0.35)
        front = pareto_front(list(zip(unserved, cost, strict=True)))
        axis.plot(*zip(*front, strict=True), "o-", color=color, markersize=4, label=name)
    axis.axvline(slo_unserved, color="C3", linestyle="--", label="SLO")
    axis.set_xscale("log")
    axis.set_xlabel("unserved fraction (1e-7 stands for none)")
    axis.set_ylabel("cost")
    axis.legend(fontsize="small")
    axis.set_title("Cost vs unserved demand")
    return figure
