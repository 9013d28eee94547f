"""Figures of a training run that the backtester does not already draw."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from training.scoring import WorkloadScore

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def forecast_figure(score: WorkloadScore, horizon: int, tau: float) -> Figure:
    """Actual demand vs the median and the ``tau`` forecast at ``horizon`` over the window."""
    # A bare Figure renders to a file without a backend, so drawing one leaves the backend a
    # notebook or a script chose (and pyplot's state) alone.
    from matplotlib.figure import Figure

    obs = score.observation
    forecast = obs.forecast
    assert forecast is not None
    h = forecast.horizons.index(horizon)
    quantiles = np.array(forecast.quantiles)
    median = int(np.argmin(np.abs(quantiles - 0.5)))
    upper = int(np.argmin(np.abs(quantiles - tau)))
    first = obs.start
    origins = np.arange(first - 1, len(obs.demand) - horizon)
    targets = score.times[origins + horizon]
    figure = Figure(figsize=(11, 3.2), layout="constrained")
    axis = figure.subplots()
    axis.plot(score.times[first:], obs.demand[first:], color="0.4", lw=0.8, label="actual")
    axis.plot(targets, forecast.values[origins, h, median], color="C0", lw=1, label="median")
    axis.plot(
        targets,
        forecast.values[origins, h, upper],
        color="C1",
        lw=1,
        label=f"q{quantiles[upper]:g} (plans with)",
    )
    axis.set_title(
        f"{score.workload}: forecast {horizon} steps ahead vs actual "
        f"(coverage of q{tau:g}: {score.coverage_at_tau:.2f})"
    )
    axis.set_ylabel("demand per second")
    axis.legend(loc="upper left", fontsize="small", ncols=3)
    return figure
