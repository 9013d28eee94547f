"""The registry of forecast models: one name, one factory.

``lightgbm-window`` is ``lightgbm`` with ``target="window"``: it also forecasts the quantiles
of the largest demand over its window of horizons (:mod:`forecaster.models.base`), with
regressors of its own; ``lightgbm-window-shift`` by the largest per-horizon quantile shifted by
split conformal on the window's maximum. Both are registered so that every benchmark compares
them with ``lightgbm`` on the same folds.

>>> sorted(MODELS)  # doctest: +NORMALIZE_WHITESPACE
['ewma', 'hist-gbm', 'last-value', 'lightgbm', 'lightgbm-window', 'lightgbm-window-shift',
 'seasonal-naive-daily', 'seasonal-naive-weekly']
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from forecaster.exceptions import UnknownNameError
from forecaster.models.base import BaseForecaster, quantile_column
from forecaster.models.baseline import EWMA, LastValue, SeasonalNaive
from forecaster.models.quantile_gbm import QuantileGradientBoosting

MODELS: dict[str, Callable[..., BaseForecaster]] = {
    "last-value": LastValue,
    "ewma": EWMA,
    "seasonal-naive-daily": partial(SeasonalNaive, season="1d"),
    "seasonal-naive-weekly": partial(SeasonalNaive, season="7d"),
    "lightgbm": partial(QuantileGradientBoosting, engine="lightgbm"),
    "lightgbm-window": partial(QuantileGradientBoosting, engine="lightgbm", target="window"),
    "lightgbm-window-shift": partial(
        QuantileGradientBoosting, engine="lightgbm", target="window", window_model="shift"
    ),
    "hist-gbm": partial(QuantileGradientBoosting, engine="hist-gbm"),
}


def make_model(name: str, **params: Any) -> BaseForecaster:
    """A new, unfitted model of registered ``name`` with ``params``.

    Raises
    ------
    UnknownNameError
        Listing the registered names.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        raise UnknownNameError(
            f"unknown model {name!r}; registered models: {', '.join(sorted(MODELS))}"
        ) from None
    return factory(**params)


__all__ = ["MODELS", "BaseForecaster", "make_model", "quantile_column"]
