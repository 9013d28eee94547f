"""The models a combination combines: every registered model but the combinations themselves.

:data:`forecaster.models.MODELS` is these plus ``combination`` and ``auto``; a new model is
registered here, and a combination can use it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from forecaster.models.base import BaseForecaster
from forecaster.models.baseline import EWMA, LastValue, SeasonalNaive
from forecaster.models.decomposition import SeasonalDecomposition
from forecaster.models.intermittent import Intermittent
from forecaster.models.quantile_gbm import QuantileGradientBoosting

COMPONENTS: dict[str, Callable[..., BaseForecaster]] = {
    "last-value": LastValue,
    "ewma": EWMA,
    "seasonal-naive-daily": partial(SeasonalNaive, season="1d"),
    "seasonal-naive-weekly": partial(SeasonalNaive, season="7d"),
    "lightgbm": partial(QuantileGradientBoosting, engine="lightgbm"),
    "hist-gbm": partial(QuantileGradientBoosting, engine="hist-gbm"),
    "mstl": SeasonalDecomposition,
    "intermittent": Intermittent,
}
