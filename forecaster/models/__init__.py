"""The registry of forecast models: one name, one factory.

``lightgbm-window`` is ``lightgbm`` with ``target="window"``: it also forecasts the quantiles
of the largest demand over its window of horizons (:mod:`forecaster.models.base`), with
regressors of its own; ``lightgbm-window-shift`` by the largest per-horizon quantile shifted by
split conformal on the window's maximum. Both also ``refit`` after calibrating, so the model
they serve has learned the calibration window (a level shift of the last days) while the
conformal offsets stay out of sample. Both are registered so that every benchmark compares
them with ``lightgbm`` on the same folds (options of ``lightgbm``, not components of the
combinations).

>>> sorted(MODELS)  # doctest: +NORMALIZE_WHITESPACE
['auto', 'combination', 'ewma', 'hist-gbm', 'intermittent', 'last-value', 'lightgbm',
 'lightgbm-window', 'lightgbm-window-shift', 'mstl', 'seasonal-naive-daily',
 'seasonal-naive-weekly']
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from forecaster.exceptions import UnknownNameError
from forecaster.models.base import BaseForecaster, quantile_column
from forecaster.models.combination import Combination
from forecaster.models.components import COMPONENTS
from forecaster.models.quantile_gbm import QuantileGradientBoosting

# What training, the backtest and the benchmarks use unless told otherwise. Not the window
# target: planned on it, hybrid missed the SLO out of sample on the viral launch, where it
# meets it on this one (benchmarks/results/backtest_savings_window.md).
DEFAULT_MODEL = "lightgbm"

# New single models go into COMPONENTS, so that the combinations can use them too.
MODELS: dict[str, Callable[..., BaseForecaster]] = {
    **COMPONENTS,
    "lightgbm-window": partial(
        QuantileGradientBoosting, engine="lightgbm", target="window", refit=True
    ),
    "lightgbm-window-shift": partial(
        QuantileGradientBoosting,
        engine="lightgbm",
        target="window",
        window_model="shift",
        refit=True,
    ),
    "combination": partial(Combination, method="weights"),
    "auto": partial(Combination, method="select"),
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
