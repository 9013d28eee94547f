"""The registry of forecast models: one name, one factory.

The single models are :data:`forecaster.models.components.COMPONENTS` (``lightgbm-window``
among them: ``lightgbm`` forecasting the window's maximum too). ``combination`` weighs some of
them per series; ``auto`` picks one per series, by what the plan sizes for (the window's
forecast), among ``lightgbm``, ``lightgbm-window`` and the seasonal and smoothing baselines
(``lightgbm-window-hourly`` too when named among its ``candidates``).

>>> sorted(MODELS)  # doctest: +NORMALIZE_WHITESPACE
['auto', 'combination', 'ewma', 'hist-gbm', 'intermittent', 'last-value', 'lightgbm',
 'lightgbm-window', 'lightgbm-window-hourly', 'lightgbm-window-shift', 'mstl',
 'seasonal-naive-daily', 'seasonal-naive-weekly']
"""

from __future__ import annotations

from collections.abc import Callable
from difflib import get_close_matches
from functools import partial
from typing import Any

from forecaster.exceptions import UnknownNameError, shown
from forecaster.models.base import BaseForecaster, quantile_column
from forecaster.models.combination import SELECT_CANDIDATES, Combination
from forecaster.models.components import COMPONENTS

# What training, the backtest and the benchmarks use unless told otherwise: the window target,
# whose forecast is the quantity the plan needs. Tuned to TUNING_MARGIN, hybrid planned on it
# holds the SLO out of sample on the savings benchmark's traces wherever plain LightGBM does,
# for less on the bursty ones, and it passes the gate at 1,000 workloads where LightGBM does
# not (benchmarks/results/backtest_savings*.md, train_scale_1000_*.md). The exception measured:
# the 1-minute viral launch of benchmarks/results/scale_from_zero*.md.
DEFAULT_MODEL = "lightgbm-window"

# New single models go into COMPONENTS, so that the combinations can use them too.
MODELS: dict[str, Callable[..., BaseForecaster]] = {
    **COMPONENTS,
    "combination": partial(Combination, method="weights"),
    "auto": partial(Combination, method="select", candidates=SELECT_CANDIDATES),
}


def make_model(name: str, **params: Any) -> BaseForecaster:
    """A new, unfitted model of registered ``name`` with ``params``.

    Raises
    ------
    UnknownNameError
        Listing the registered names, or the model's parameters when one of ``params`` is
        none of them.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        raise UnknownNameError(unknown_model(name)) from None
    known = factory().get_params()
    for param in params:
        if param not in known:
            close = get_close_matches(param, known, n=1)
            hint = f"did you mean `{close[0]}`? " if close else ""
            raise UnknownNameError(
                f"model {name!r} has no parameter `{str(param)[:60]}`; {hint}"
                f"its parameters: {', '.join(sorted(known))}"
            )
    return factory(**params)


def unknown_model(name: object) -> str:
    """What is wrong with a model ``name`` that is not registered: the registered name it is
    likely a typo of, and every registered name.

    >>> unknown_model("lightgbm-windw").split("? ")[0]
    "unknown model 'lightgbm-windw'; did you mean 'lightgbm-window'"
    """
    close = get_close_matches(str(name), MODELS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    registered = ", ".join(sorted(MODELS))
    return f"unknown model {shown(str(name), 60)}; {hint}registered models: {registered}"


def averages_boosters(name: str) -> bool:
    """Whether registered model ``name`` takes ``n_seeds``: boosters of their own seeds,
    averaged (:class:`~forecaster.models.quantile_gbm.SeedAverage`).

    Raises
    ------
    UnknownNameError
        Listing the registered names.
    """
    return "n_seeds" in make_model(name).get_params()


__all__ = [
    "MODELS",
    "BaseForecaster",
    "averages_boosters",
    "make_model",
    "quantile_column",
    "unknown_model",
]
