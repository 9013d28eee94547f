"""Forecast accuracy metrics on aligned arrays (NaN actuals are ignored everywhere)."""

from __future__ import annotations

import numpy as np

from forecaster.calibration import coverage
from forecaster.exceptions import DataValidationError

__all__ = [
    "coverage",
    "mae",
    "mase",
    "peak_underforecast",
    "pinball_loss",
    "pinball_losses",
    "rmse",
]


def _aligned(actual: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    actual = np.asarray(actual, dtype=float)
    predicted = np.asarray(predicted, dtype=float)
    if actual.shape != predicted.shape:
        raise DataValidationError(
            "`actual` and `predicted` must have one shape, got "
            f"{actual.shape} and {predicted.shape}"
        )
    keep = np.isfinite(actual) & np.isfinite(predicted)
    if not keep.any():
        raise DataValidationError("no finite (actual, predicted) pair to score")
    return actual[keep], predicted[keep]


def mae(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Mean absolute error."""
    a, p = _aligned(actual, predicted)
    return float(np.mean(np.abs(a - p)))


def rmse(actual: np.ndarray, predicted: np.ndarray) -> float:
    """Root mean squared error."""
    a, p = _aligned(actual, predicted)
    return float(np.sqrt(np.mean((a - p) ** 2)))


def pinball_loss(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> float:
    """Mean pinball (quantile) loss of ``predicted`` as the ``quantile`` level.

    >>> pinball_loss(np.array([10.0]), np.array([8.0]), 0.9)  # under by 2: 0.9 * 2
    1.8
    """
    a, p = _aligned(actual, predicted)
    return float(np.mean(pinball_losses(a, p, quantile)))


def pinball_losses(actual: np.ndarray, predicted: np.ndarray, quantile: float) -> np.ndarray:
    """The pinball loss of each (actual, predicted) pair, NaN where either is not finite.

    >>> pinball_losses(np.array([10.0, 10.0, np.nan]), np.array([8.0, 12.0, 9.0]), 0.9)
    array([1.8, 0.2, nan])
    """
    if not 0.0 < quantile < 1.0:
        raise DataValidationError(f"`quantile` must be in (0, 1), got {quantile!r}")
    a = np.asarray(actual, dtype=float)
    p = np.asarray(predicted, dtype=float)
    diff = a - p
    loss = np.maximum(quantile * diff, (quantile - 1.0) * diff)
    return np.where(np.isfinite(a) & np.isfinite(p), loss, np.nan)


def seasonal_naive_scale(history: np.ndarray, season: int) -> float:
    """Mean absolute change over one season in ``history``: the MASE denominator."""
    history = np.asarray(history, dtype=float)
    if season < 1 or len(history) <= season:
        raise DataValidationError(
            f"MASE needs more than `season`={season} steps (one season) of history to scale "
            f"its error, got {len(history)}"
        )
    changes = np.abs(history[season:] - history[:-season])
    changes = changes[np.isfinite(changes)]
    if changes.size == 0 or changes.mean() == 0:
        raise DataValidationError("MASE is undefined: the history never changes over a season")
    return float(changes.mean())


def mase(actual: np.ndarray, predicted: np.ndarray, history: np.ndarray, season: int) -> float:
    """MAE divided by the in-sample MAE of the seasonal naive forecast on ``history``.

    Below 1 the forecast beats "same time one season ago" measured on the training data.
    """
    return mae(actual, predicted) / seasonal_naive_scale(history, season)


def peak_underforecast(actual: np.ndarray, predicted: np.ndarray, level: float = 0.95) -> float:
    """Mean shortfall ``max(actual - predicted, 0)`` where demand is above its ``level`` quantile.

    The error that costs SLO: capacity missing exactly when demand peaks.
    """
    a, p = _aligned(actual, predicted)
    peaks = a >= np.quantile(a, level)
    return float(np.mean(np.maximum(a[peaks] - p[peaks], 0.0)))
