"""The registry of forecast models: one name, one factory.

>>> sorted(MODELS)  # doctest: +NORMALIZE_WHITESPACE
['auto', 'combination', 'ewma', 'hist-gbm', 'intermittent', 'last-value', 'lightgbm', 'mstl',
 'seasonal-naive-daily', 'seasonal-naive-weekly']
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from forecaster.exceptions import UnknownNameError
from forecaster.models.base import BaseForecaster, quantile_column
from forecaster.models.combination import Combination
from forecaster.models.components import COMPONENTS

# New single models go into COMPONENTS, so that the combinations can use them too.
MODELS: dict[str, Callable[..., BaseForecaster]] = {
    **COMPONENTS,
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
