"""The models a combination combines: every registered model but the combinations themselves.

:data:`forecaster.models.MODELS` is these plus ``combination`` and ``auto``; a new model is
registered here, and a combination can use it at once.

``lightgbm-window`` is ``lightgbm`` with ``target="window"``: it also forecasts the quantiles
of the largest demand over its window of horizons (:mod:`forecaster.models.base`), with
regressors of its own; ``lightgbm-window-shift`` by the largest per-horizon quantile shifted by
split conformal on the window's maximum. Both also ``refit`` after calibrating, so the model
they serve has learned the calibration window (a level shift of the last days) while the
conformal offsets stay out of sample.

``lightgbm-window-hourly`` is ``lightgbm-window`` with the hour's phase added to whatever
features it is given (:func:`forecaster.features.with_hour_phase`): the minute of the hour
and the demand an hour before the target, for demand with an hourly rhythm. Not the default:
the plan does not follow its lower loss everywhere (benchmarks/results/
backtest_savings_hourly.md); ``auto`` can be given it to choose per workload.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from forecaster.features import FeatureConfig, with_hour_phase
from forecaster.models.base import BaseForecaster
from forecaster.models.baseline import EWMA, LastValue, SeasonalNaive
from forecaster.models.decomposition import SeasonalDecomposition
from forecaster.models.intermittent import Intermittent
from forecaster.models.quantile_gbm import QuantileGradientBoosting

WINDOW = partial(QuantileGradientBoosting, engine="lightgbm", target="window", refit=True)


def hourly_window(features: FeatureConfig | None = None, **params: Any) -> BaseForecaster:
    """``lightgbm-window`` whose ``features`` (the defaults when None) gain the hour's phase;
    ``params`` as for it."""
    return WINDOW(features=with_hour_phase(features or FeatureConfig()), **params)


COMPONENTS: dict[str, Callable[..., BaseForecaster]] = {
    "last-value": LastValue,
    "ewma": EWMA,
    "seasonal-naive-daily": partial(SeasonalNaive, season="1d"),
    "seasonal-naive-weekly": partial(SeasonalNaive, season="7d"),
    "lightgbm": partial(QuantileGradientBoosting, engine="lightgbm"),
    "hist-gbm": partial(QuantileGradientBoosting, engine="hist-gbm"),
    "mstl": SeasonalDecomposition,
    "intermittent": Intermittent,
    "lightgbm-window": WINDOW,
    "lightgbm-window-shift": partial(WINDOW, window_model="shift"),
    "lightgbm-window-hourly": hourly_window,
}
