"""Walk-forward forecasts: retrain on a trailing window, forecast every origin of a period.

::

    data   |-------- train_window --------|== period 1 ==|
               |-------- train_window --------|== period 2 ==|
                                 each period: one fit, one batched predict of its origins

Period ``p`` covers data steps ``[s_p, s_p + retrain_every)``; its model is fitted on
``[s_p - train_window, s_p)`` and forecasts origins ``s_p - 1 .. s_p + retrain_every - 2``,
the origins in force during the period (an origin is known one step after it starts).
Each origin's features come only from rows at or before it (the model's contract), so no
forecast sees the future; a test corrupts the future to prove it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.exceptions import ConfigError, NotEnoughHistoryError
from forecaster.models.base import BaseForecaster
from forecaster.policies.base import QuantileForecast
from forecaster.splitting import Fold, origins

ModelFactory = Callable[[tuple[int, ...], tuple[float, ...]], BaseForecaster]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class WalkForward:
    """The retraining schedule, in data steps.

    Parameters
    ----------
    train_window
        Steps each model is fitted on.
    retrain_every
        Steps between refits (the length of a period).
    """

    train_window: int
    retrain_every: int

    def __post_init__(self) -> None:
        if self.train_window < 2 or self.retrain_every < 1:
            raise ConfigError(
                "`train_window` must be >= 2 and `retrain_every` >= 1 data steps, "
                f"got {self.train_window!r} and {self.retrain_every!r}"
            )

    def split(self, n: int) -> Iterator[Fold]:
        """Each period of a grid of ``n`` data steps: ``train`` is the trailing window its
        model is fitted on, ``test`` the period's steps (served by the origins
        :func:`forecaster.splitting.origins` gives)."""
        if self.train_window >= n:
            raise NotEnoughHistoryError(
                f"the walk-forward needs {self.train_window} data steps of training history "
                f"and some data after it; the trace has {n}"
            )
        return (
            (range(s - self.train_window, s), range(s, min(s + self.retrain_every, n)))
            for s in range(self.train_window, n, self.retrain_every)
        )


def walk_forward_forecast(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    make_model: ModelFactory,
    splitter: WalkForward,
    horizons: Sequence[int],
    quantiles: Sequence[float],
    *,
    series: str = "workload",
    progress: Progress | None = None,
) -> QuantileForecast:
    """Forecasts for every origin of the evaluation, aligned to data steps.

    Parameters
    ----------
    values
        Demand per data step (NaN = missing).
    times
        The UTC grid of ``values``.
    make_model
        ``make_model(horizons, quantiles)`` returns a new, unfitted model.
    splitter
        Retraining schedule.
    horizons, quantiles
        Horizons (data steps) and quantile levels to forecast.
    progress
        Called as ``progress(periods_done, periods_total)``.

    Returns
    -------
    QuantileForecast
        Row ``j`` holds origin ``j``'s forecasts; NaN for origins outside the evaluation.
    """
    horizons = tuple(int(h) for h in horizons)
    quantiles = tuple(float(q) for q in quantiles)
    frame = pd.DataFrame({"series": series, "timestamp": times, "value": values})
    periods = list(splitter.split(len(values)))
    forecasts, windows = [], []
    for done, (train, test) in enumerate(periods, start=1):
        model = make_model(horizons, quantiles)
        model.fit(frame.iloc[train.start : train.stop])
        served = origins(test)
        context = frame.iloc[train.start : served.stop]
        forecasts.append(model.predict(context, origins=times[served.start : served.stop]))
        spanned = model.predict_window(context, origins=times[served.start : served.stop])
        if spanned is not None:
            windows.append(spanned)
        if progress is not None:
            progress(done, len(periods))
    return QuantileForecast.from_long(
        pd.concat(forecasts, ignore_index=True),
        pd.concat(windows, ignore_index=True) if windows else None,
        times,
        horizons,
        quantiles,
    )
