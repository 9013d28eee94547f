"""Rolling-origin evaluation: how good is each forecaster on this data, at this horizon?

The same code scores prewarm's models and any peer wrapped to the forecaster protocol, so a
comparison table is like for like: same origins, same refits, same metrics.

Given a window of horizons, it also scores what a capacity plan over that window sizes for
(:func:`forecaster.models.base.lead_window_forecast`): a model's window target where it has one
for that window, else the largest of its per-horizon quantiles, against the largest value
that arrived in the window. Window coverage is the fraction of windows whose maximum stayed
at or under that forecast.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
from sklearn.base import clone

from forecaster.exceptions import DataValidationError, NotEnoughHistoryError
from forecaster.frame import DEFAULT_COLUMNS, Columns
from forecaster.metrics import (
    coverage,
    mae,
    peak_underforecast,
    pinball_loss,
    rmse,
    seasonal_naive_scale,
)
from forecaster.models.base import BaseForecaster, planned_window, quantile_column
from forecaster.splitting import Fold, origins

Progress = Callable[[str, int, int], None]


class Forecaster(Protocol):
    """What the evaluation needs of a model (every registered model satisfies it)."""

    def fit(self, frame: pd.DataFrame) -> Any: ...

    def predict(self, frame: pd.DataFrame, origins: pd.DatetimeIndex) -> pd.DataFrame: ...


@dataclass(frozen=True)
class RollingOrigin:
    """Splits the last ``eval_cells`` of a grid into refit blocks of ``refit_every`` cells.

    ::

        history ............................| evaluation window
        fit on ████████████████████████████ | o o o o o o            block 1
        fit on ██████████████████████████████████████ | o o o o o o  block 2
                                    each o: forecast at the horizon from data up to o

    Every origin is forecast ``horizon`` cells ahead and scored against what arrived; the
    model is refitted at the start of each block on all data up to that instant.
    """

    horizon: int
    eval_cells: int
    refit_every: int

    def split(self, n: int) -> Iterator[Fold]:
        """Each refit block of a grid of ``n`` cells: the model is fitted on cells ``train``
        (all up to the block's first origin) and forecasts from each origin of ``test``
        (:func:`forecaster.splitting.origins`)."""
        scoreable = max(n - self.horizon, 0)
        first = scoreable - self.eval_cells
        if self.eval_cells < 1 or first < 1:
            raise NotEnoughHistoryError(
                f"the evaluation window of {self.eval_cells} cells needs more history: the data "
                f"has {n} cells and the horizon is {self.horizon}"
            )
        return (
            (range(0, start + 1), range(start + 1, min(start + self.refit_every, scoreable) + 1))
            for start in range(first, scoreable, self.refit_every)
        )


@dataclass(frozen=True)
class Evaluation:
    """Scores per model, and every scored forecast beside its actual value.

    ``scores`` is NaN where a metric cannot be computed on this data; ``missing`` gives the
    reason per model and score column. ``skipped`` names each model that could not be fitted
    on the history, with the reason; it has no row in ``scores``.
    """

    scores: pd.DataFrame
    forecasts: pd.DataFrame
    start: pd.Timestamp
    end: pd.Timestamp
    origins: int
    horizon_seconds: int
    missing: dict[str, dict[str, str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def evaluate(
    frame: pd.DataFrame,
    models: Mapping[str, Forecaster],
    splitter: RollingOrigin,
    *,
    step: int,
    season: int,
    quantiles: Sequence[float] = (0.5, 0.9),
    columns: Columns = DEFAULT_COLUMNS,
    progress: Progress | None = None,
    window: tuple[int, int] | None = None,
) -> Evaluation:
    """Walk every model forward over the splitter's blocks and score it.

    Parameters
    ----------
    frame
        Long frame on a grid of ``step`` seconds (NaN = gap).
    models
        Name -> unfitted forecaster, cloned for every block (anything with ``fit`` and
        ``predict`` returning the long forecast format; estimators are cloned with
        :func:`sklearn.base.clone`, other objects must be reusable across fits).
    splitter
        The rolling-origin folds.
    step
        Grid step in seconds.
    season
        Season in cells for MASE's seasonal naive scale (one day for sub-daily data). On a
        history of one season or less, or one that never changes over a season, MASE is
        missing (NaN, with the reason in :attr:`Evaluation.missing`).
    quantiles
        Quantile columns to score; every model must produce them.
    progress
        Called as ``progress(model, blocks_done, blocks_total)``.
    window
        First and last horizon (cells) of a plan's window, each forecast by every model:
        adds ``window_pinball_<q>`` and ``window_coverage_<q>`` to the scores, over the
        origins whose whole window lies within the data.

    Raises
    ------
    NotEnoughHistoryError
        When the splitter's window leaves no history, or no model can be fitted.
    """
    times = pd.DatetimeIndex(np.sort(frame[columns.time_col].unique()))
    blocks = [
        (times[train.start : train.stop], times[origins(test).start : origins(test).stop])
        for train, test in splitter.split(len(times))
    ]
    history = frame[frame[columns.time_col] < blocks[0][1][0]]
    scales, scale_missing = _mase_scales(history, season, columns)
    actual = frame.set_index([columns.id_col, columns.time_col])[columns.target_col]
    rows, scored, missing, skipped = [], [], {}, {}
    for name, template in models.items():
        try:
            forecasts, windows, fit_seconds, predict_seconds = _walk(
                name, template, frame, blocks, columns.time_col, progress
            )
        except NotEnoughHistoryError as exc:  # too short for this model: score the others
            skipped[name] = str(exc)
            continue
        result = forecasts[forecasts["horizon"] == splitter.horizon]
        keys = pd.MultiIndex.from_arrays([result[columns.id_col], result["target_time"]])
        result = result.assign(actual=actual.reindex(keys).to_numpy(), model=name)
        result = result[np.isfinite(result["actual"])]
        scored.append(result)
        values, missing[name] = _score(result, quantiles, scales, columns.id_col)
        missing[name] |= scale_missing
        if window is not None:
            values |= _window_scores(
                forecasts, windows, template, window, actual, quantiles, columns, times[-1]
            )
        rows.append(
            values | {"model": name, "fit_seconds": fit_seconds, "predict_seconds": predict_seconds}
        )
    if not rows:
        raise NotEnoughHistoryError(
            "no model can be fitted on this history: "
            + "; ".join(f"{name}: {reason}" for name, reason in skipped.items())
        )
    return Evaluation(
        scores=pd.DataFrame(rows).set_index("model"),
        forecasts=pd.concat(scored, ignore_index=True),
        start=blocks[0][1][0],
        end=blocks[-1][1][-1],
        origins=sum(len(block_origins) for _, block_origins in blocks),
        horizon_seconds=splitter.horizon * step,
        missing=missing,
        skipped=skipped,
    )


def _walk(
    name: str,
    template: Forecaster,
    frame: pd.DataFrame,
    blocks: Sequence[tuple[pd.DatetimeIndex, pd.DatetimeIndex]],
    time_col: str,
    progress: Progress | None,
) -> tuple[pd.DataFrame, pd.DataFrame | None, float, float]:
    """Every block's forecasts of one model, its window forecasts (None without a window
    target), and the seconds spent fitting and predicting.

    Each block is (the times it is fitted on, its origins)."""
    forecasts, windows, fit_seconds, predict_seconds = [], [], 0.0, 0.0
    if progress is not None:  # before the first fit, which may log: say whose it is
        progress(name, 0, len(blocks))
    for done, (train, block_origins) in enumerate(blocks):
        model = clone(template) if hasattr(template, "get_params") else template
        started = time.perf_counter()
        model.fit(frame[frame[time_col].between(train[0], train[-1])])
        fit_seconds += time.perf_counter() - started
        started = time.perf_counter()
        forecasts.append(model.predict(frame, origins=block_origins))
        # Peers have per-horizon forecasts only: their plan is the largest of those.
        if isinstance(model, BaseForecaster) and model.window_span is not None:
            windows.append(model.predict_window(frame, origins=block_origins))
        predict_seconds += time.perf_counter() - started
        if progress is not None:
            progress(name, done + 1, len(blocks))
    spanned = pd.concat(windows, ignore_index=True) if windows else None
    return pd.concat(forecasts, ignore_index=True), spanned, fit_seconds, predict_seconds


def _window_span(model: Forecaster) -> tuple[int, int] | None:
    """The span of the model's window target; None for a model without one (or a peer)."""
    return model.window_span if isinstance(model, BaseForecaster) else None


def _window_scores(
    forecasts: pd.DataFrame,
    windows: pd.DataFrame | None,
    model: Forecaster,
    window: tuple[int, int],
    actual: pd.Series,
    quantiles: Sequence[float],
    columns: Columns,
    end: pd.Timestamp,
) -> dict[str, float]:
    """Pinball loss and coverage of the plan's forecast of each window's maximum."""
    first, last = window
    levels = [quantile_column(q) for q in quantiles]
    inside = forecasts[forecasts["horizon"].between(first, last)]
    keys = pd.MultiIndex.from_arrays([inside[columns.id_col], inside["target_time"]])
    inside = inside.assign(actual=actual.reindex(keys).to_numpy())
    grouped = inside.groupby([columns.id_col, "origin"])
    observed = grouped["actual"].max()
    # Scored where every horizon of the window was forecast and the window ends in the data.
    complete = (grouped["horizon"].nunique() == last - first + 1) & (
        grouped["target_time"].max() <= end
    )
    planned = planned_window(
        forecasts, windows, _window_span(model), window, columns.id_col, levels
    )
    predicted = planned.reindex(observed.index).to_numpy(dtype=float)
    y = observed.to_numpy(dtype=float)
    keep = complete.to_numpy() & np.isfinite(y)
    out = {}
    for j, q in enumerate(quantiles):
        scored = keep & np.isfinite(predicted[:, j])
        out[f"window_pinball_{q:g}"] = (
            pinball_loss(y[scored], predicted[scored, j], q) if scored.any() else float("nan")
        )
        out[f"window_coverage_{q:g}"] = coverage(y[scored], predicted[scored, j])
    return out


def _mase_scales(
    history: pd.DataFrame, season: int, columns: Columns
) -> tuple[dict[str, float], dict[str, str]]:
    """MASE's denominator per series, and ``{"mase": reason}`` when a series has none."""
    scales, reasons = {}, []
    several = history[columns.id_col].nunique() > 1
    for series, part in history.groupby(columns.id_col):
        try:
            scales[str(series)] = seasonal_naive_scale(part[columns.target_col].to_numpy(), season)
        except DataValidationError as exc:
            reasons.append(f"series {series!r}: {exc}" if several else str(exc))
    return scales, ({"mase": "; ".join(reasons)} if reasons else {})


def _score(
    result: pd.DataFrame, quantiles: Sequence[float], scales: Mapping[str, float], id_col: str
) -> tuple[dict[str, float], dict[str, str]]:
    """Score columns (NaN where undefined) and the reason per undefined column."""
    y = result["actual"].to_numpy()
    median = result[quantile_column(0.5)].to_numpy()
    # A series without a scale makes the mean over series undefined, not just smaller.
    scale = result[id_col].map(scales).to_numpy(dtype=float)
    level = float(np.mean(y))
    out = {
        "mae": mae(y, median),
        "rmse": rmse(y, median),
        "mase": float(np.mean(np.abs(y - median) / scale)),
        "peak_underforecast": peak_underforecast(y, median),
    }
    missing = {}
    for q in quantiles:
        predicted = result[quantile_column(q)].to_numpy()
        loss = pinball_loss(y, predicted, q)
        out[f"pinball_{q:g}"] = loss
        out[f"relative_pinball_{q:g}"] = loss / level if level > 0 else float("nan")
        out[f"coverage_{q:g}"] = coverage(y, predicted)
        if not level > 0:
            missing[f"relative_pinball_{q:g}"] = (
                f"the mean demand over the scored span is {level:g}, nothing to divide by"
            )
    return out, missing
