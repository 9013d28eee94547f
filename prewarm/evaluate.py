"""``prewarm evaluate``: how good is the forecast on my data?"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from prewarm.exit_codes import epilog
from prewarm.options import (
    Duration,
    OutputFile,
    PositiveNumber,
    configure_logging,
    console,
    given_names,
    log_level_option,
    progress_bar,
    user_errors,
)
from prewarm.spans import duration_text, scored_span, span_text
from prewarm.tables import Cell, Missing, TableSpec, print_table
from training.documents import dumps

DEFAULT_QUANTILES = (0.5, 0.9)
DAY = 86400
DEFAULT_EVAL_DAYS = 7.0
# Table columns: header, where the value sits in a model's JSON entry, number format.
TABLE_COLUMNS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("MAE", ("mae",), ".4g"),
    ("MASE", ("mase",), ".3f"),
    ("pinball\nq0.5", ("pinball", "0.5"), ".4g"),
    ("pinball\nq0.9", ("pinball", "0.9"), ".4g"),
    ("rel\nq0.5", ("relative_pinball", "0.5"), ".3f"),
    ("rel\nq0.9", ("relative_pinball", "0.9"), ".3f"),
    ("cov\nq0.9", ("coverage", "0.9"), ".3f"),
    ("window\npinball\nq0.9", ("window_pinball", "0.9"), ".4g"),
    ("window\ncov\nq0.9", ("window_coverage", "0.9"), ".3f"),
    ("seconds", ("seconds",), ".1f"),
)
PER_QUANTILE = ("pinball", "relative_pinball", "coverage", "window_pinball", "window_coverage")
WINDOW_COLUMNS = tuple(
    f"{metric}_{q:g}" for metric in ("window_pinball", "window_coverage") for q in DEFAULT_QUANTILES
)
DEFAULT_HOLD_SECONDS = 600


def horizon_cells(horizon_seconds: int, step: int) -> int:
    """Horizon in grid cells: at least one, rounded up to a whole cell."""
    return max(1, math.ceil(horizon_seconds / step))


def window_cells(horizon_seconds: int, hold_seconds: int, step: int) -> tuple[int, int]:
    """First and last horizon (cells) of the window ``[t + horizon, t + horizon + hold]``
    whose maximum a plan sizes for."""
    first = horizon_cells(horizon_seconds, step)
    return first, first + math.ceil(hold_seconds / step)


class ModelNamed(logging.Filter):
    """Names the model being evaluated in what its fits log, and passes each kind of message
    (its text with the numbers left out: a refit's counts differ) once per model: every model
    fitting boosters said the same note without its name, and each model once per refit."""

    def __init__(self) -> None:
        super().__init__()
        self.model: str | None = None
        self._said: set[tuple[str, str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.model is None or not record.name.startswith("forecaster"):
            return True
        kind = (self.model, record.name, re.sub(r"\d+", "#", record.getMessage()))
        if kind in self._said:
            return False
        self._said.add(kind)
        record.msg, record.args = f"{self.model}: {record.getMessage()}", None
        return True


@contextmanager
def models_named() -> Iterator[ModelNamed]:
    """A ``ModelNamed`` filter on the forecaster's handlers for one run, taken off after it:
    left on, it would name a model in whatever the process logs next."""
    named = ModelNamed()
    handlers = list(logging.getLogger("forecaster").handlers)
    for handler in handlers:
        handler.addFilter(named)
    try:
        yield named
    finally:
        for handler in handlers:
            handler.removeFilter(named)


def window_horizons(window: tuple[int, int]) -> tuple[int, ...]:
    """Every horizon (cells) of ``window``: what each model forecasts to score it."""
    return tuple(range(window[0], window[1] + 1))


def season_cells(step: int) -> int:
    """One day of cells for sub-daily data, one week for daily data."""
    return DAY // step if step < DAY else max(1, 7 * DAY // step)


def run_evaluation(
    data: Path,
    *,
    value_col: str | None,
    step: int | None,
    horizon: int,
    eval_days: float | None,
    refit_every: int,
    models: list[str] | None,
    hold: int = DEFAULT_HOLD_SECONDS,
    callback: Any = None,
) -> dict[str, Any]:
    """Evaluate the named models on ``data``; return the JSON-ready report.

    Every model forecasts each horizon of the window ``[t + horizon, t + horizon + hold]``:
    the per-horizon scores are at ``horizon``, the window scores of the window's maximum
    (:func:`forecaster.evaluation.evaluate`).

    ``eval_days=None`` scores the last 7 days, less on data shorter than 14 days (see
    :func:`prewarm.spans.scored_span`); the report's ``notes`` then say so.
    """
    import pandas as pd

    from forecaster.evaluation import RollingOrigin, evaluate
    from training.sources.file import load_history

    history = load_history(data, step=step, value_col=value_col)
    cells = horizon_cells(horizon, history.step)
    window = window_cells(horizon, hold, history.step)
    times = pd.DatetimeIndex(history.frame["timestamp"].unique()).sort_values()
    eval_cells, notes = evaluation_cells(len(times), history.step, cells, eval_days)
    if cells * history.step != horizon:
        notes.append(
            f"--horizon {duration_text(horizon)} is not a whole number of the data's "
            f"{duration_text(history.step)} steps: forecasts are scored "
            f"{duration_text(cells * history.step)} ahead, the next whole step."
        )
    scored_window: tuple[int, int] | None = window
    if window[1] > eval_cells:
        # No origin's window would end within the data: forecasting each of its horizons
        # would cost time and memory (a --hold of days: gigabytes) for no score.
        scored_window = None
        notes.append(
            f"Window scores not computed: --horizon plus --hold "
            f"({duration_text(window[1] * history.step)}) is longer than the scored span "
            f"({duration_text(eval_cells * history.step)}); lower --hold, or score more with "
            "--eval-days."
        )
    refit_cells = max(1, round(refit_every / history.step))
    splitter = RollingOrigin(horizon=cells, eval_cells=eval_cells, refit_every=refit_cells)
    train, _ = next(splitter.split(len(times)))
    before = (times[train.stop - 1] - times[0]).total_seconds()
    estimators, skipped = _models_for(models, scored_window or (cells, cells), before)
    result = evaluate(
        history.frame,
        estimators,
        splitter,
        step=history.step,
        season=season_cells(history.step),
        quantiles=DEFAULT_QUANTILES,
        progress=callback,
        window=scored_window,
    )
    end = result.end + pd.Timedelta(seconds=history.step)
    scored = int(result.forecasts.groupby("model").size().max())
    forecasts = result.origins * history.frame["series"].nunique()
    if scored < forecasts / 2:  # scores on a few points would read like a week's
        notes.append(
            f"Only {scored} of the {forecasts} forecasts had an observed demand to score "
            "(the data has gaps in the scored span): every score rests on those."
        )
    unscored = (
        {}
        if scored_window
        else dict.fromkeys(WINDOW_COLUMNS, "--horizon plus --hold is longer than the scored span")
    )
    return {
        "data": {"path": str(data), "rows": history.rows, "step_seconds": history.step},
        "horizon_seconds": result.horizon_seconds,
        "horizon_cells": cells,
        "window_cells": list(window) if scored_window else None,
        "evaluation": {
            "start": result.start.isoformat(),
            "end": end.isoformat(),
            "hours": (end - result.start).total_seconds() / 3600.0,
            "origins": result.origins,
            "scored": scored,
            "refit_every_seconds": refit_cells * history.step,
        },
        "models": {
            str(name): _model_entry(row, result.missing.get(str(name), {}) | unscored)
            for name, row in result.scores.iterrows()
        },
        "skipped": skipped | result.skipped,
        "notes": notes,
    }


def evaluation_cells(
    n: int, step: int, horizon: int, eval_days: float | None
) -> tuple[int, list[str]]:
    """Origins to score on ``n`` cells of ``step`` seconds, and a note when that is fewer
    than the default's 7 days because the data is short.

    Raises
    ------
    ConfigError
        ``eval_days`` shorter than one step.
    NotEnoughHistoryError
        No history would be left before the scored span; the message names the flags.
    """
    from forecaster.exceptions import ConfigError, NotEnoughHistoryError

    total = n * step
    preferred = (DEFAULT_EVAL_DAYS if eval_days is None else eval_days) * DAY
    seconds = preferred if eval_days is not None else scored_span(total, preferred)
    cells = round(min(seconds, total) / step)  # min: --eval-days 1e308 is all the data, not inf
    notes = []
    if seconds < preferred:
        notes.append(
            f"The data spans {duration_text(total)}, too short to score "
            f"{DEFAULT_EVAL_DAYS:g} days: scored its last {duration_text(cells * step)} "
            "(--eval-days sets the span)."
        )
    if cells < 1:
        raise ConfigError(f"`--eval-days` {eval_days!r} is shorter than one step of the data")
    if cells >= n - horizon:
        asked = "" if eval_days is None else f" (--eval-days {eval_days:g})"
        flags = "lower --horizon" if eval_days is None else "lower --horizon or --eval-days"
        raise NotEnoughHistoryError(
            f"scoring {duration_text(cells * step)}{asked} of forecasts "
            f"{duration_text(horizon * step)} ahead (--horizon) needs more history: the data "
            f"spans {duration_text(total)}; {flags}"
        )
    return cells, notes


def _models_for(
    names: list[str] | None, window: tuple[int, int], history_seconds: float
) -> tuple[dict[str, Any], dict[str, str]]:
    """The named models (default: all), forecasting every horizon of ``window``, that can be
    scored after ``history_seconds`` of history, and the reason each other one is skipped."""
    from forecaster.exceptions import NotEnoughHistoryError
    from forecaster.models import MODELS, make_model

    estimators, skipped = {}, {}
    horizons = window_horizons(window)
    for name in names or list(MODELS):
        model = make_model(name, horizons=horizons, quantiles=DEFAULT_QUANTILES)
        reason = _season_shortfall(model.get_params().get("season"), history_seconds)
        if reason is None:
            estimators[name] = model
        else:
            skipped[name] = reason
    if not estimators:
        raise NotEnoughHistoryError(
            "no model can be evaluated: "
            + "; ".join(f"{name}: {reason}" for name, reason in skipped.items())
            + "; choose others with --models, or score less with --eval-days"
        )
    return estimators, skipped


def _season_shortfall(season: str | None, history_seconds: float) -> str | None:
    """Why a seasonal model is left out on this history; None when it is scored."""
    from forecaster.duration import parse_duration

    if season is None or parse_duration(season, name="season") <= history_seconds:
        return None
    # Without one season of history a seasonal naive forecast is the last value: its scores
    # would be last-value's under another name.
    return (
        f"its season ({season}) is longer than the history before the scored span "
        f"({duration_text(history_seconds)})"
    )


def _model_entry(row: Any, missing: dict[str, str]) -> dict[str, Any]:
    """A model's JSON entry: null where a metric is missing, ``missing`` giving the reason
    under the metric's path (``mase``, ``relative_pinball.0.9``)."""
    levels = [f"{q:g}" for q in DEFAULT_QUANTILES]
    entry: dict[str, Any] = {
        name: _number(row[name]) for name in ("mae", "rmse", "mase", "peak_underforecast")
    }
    for metric in PER_QUANTILE:  # a window's, when it is not scored, not in ``row``
        entry[metric] = {q: _number(row.get(f"{metric}_{q}", math.nan)) for q in levels}
    entry["seconds"] = row["fit_seconds"] + row["predict_seconds"]
    entry["missing"] = {_metric_path(column): reason for column, reason in missing.items()}
    return entry


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _metric_path(column: str) -> str:
    """``relative_pinball_0.9`` -> ``relative_pinball.0.9``; ``mase`` stays."""
    for metric in PER_QUANTILE:
        if column.startswith(f"{metric}_"):
            return f"{metric}.{column.removeprefix(f'{metric}_')}"
    return column


def table_spec(report: dict[str, Any]) -> TableSpec:
    """The report's models as a table: a row per model, ``—`` and a footnote where a metric
    is missing, the skipped models and the notes below."""
    evaluation = report["evaluation"]
    models = report["models"]
    scored = [name for name, m in models.items() if m["pinball"]["0.9"] is not None]
    best = min(scored, key=lambda name: models[name]["pinball"]["0.9"], default=None)
    window_note = []
    if report["window_cells"] is not None:
        first, last = report["window_cells"]
        step = report["data"]["step_seconds"]
        window_note.append(
            f"window: the largest demand over {duration_text(first * step)} .. "
            f"{duration_text(last * step)} ahead (cells {first}..{last}) against what a plan "
            "sizes for: the model's window target, else the largest of its per-horizon quantiles."
        )
    return TableSpec(
        title=f"Forecasts {duration_text(report['horizon_seconds'])} ahead from "
        f"{evaluation['origins']} origins, " + span_text(evaluation["start"], evaluation["end"]),
        key="model",
        headers=tuple(header for header, _, _ in TABLE_COLUMNS),
        rows=[
            (name, [_cell(m, path, fmt) for _, path, fmt in TABLE_COLUMNS])
            for name, m in models.items()
        ],
        notes=window_note
        + [f"{name} skipped: {reason}" for name, reason in report["skipped"].items()]
        + report["notes"],
        highlight=best,
    )


def _cell(entry: dict[str, Any], path: tuple[str, ...], fmt: str) -> Cell:
    value: Any = entry
    for key in path:
        value = value[key]
    if value is None:
        return Missing(entry["missing"].get(".".join(path), "could not be computed"))
    return format(value, fmt)


@click.command(
    epilog=epilog(
        OK="the table was printed (and the JSON written)",
        FAILURE="unexpected failure (e.g. the JSON cannot be written)",
        CONFIG="a malformed flag or an unknown model name",
        DATA="the data cannot be read, holds values out of range, or is too short for the\n"
        "     flags (the message names the row, or the flag to change)",
    )
)
# readable=False: an unreadable file is a data error (exit 3) the source names, as a missing one
@click.argument("data", type=click.Path(readable=False, path_type=Path))
@click.option("--value-col", default=None, help="Column holding the demand.")
@click.option(
    "--step",
    type=Duration(allow_auto=True),
    default="auto",
    show_default=True,
    help="Grid step (auto: the data's own).",
)
@click.option(
    "--horizon",
    type=Duration(),
    default="10m",
    show_default=True,
    help="How far ahead each forecast is scored (at least one step).",
)
@click.option(
    "--eval-days",
    type=PositiveNumber(),
    default=None,
    help="Days at the end of the data whose origins are scored. Default: 7, or on data "
    "shorter than 14 days what is left after 7 days of history, but at least its last 20%.",
)
@click.option(
    "--refit-every",
    type=Duration(),
    default="1d",
    show_default=True,
    help="Models are refitted this often on all data before.",
)
@click.option(
    "--hold",
    type=Duration(),
    default=duration_text(DEFAULT_HOLD_SECONDS),
    show_default=True,
    help="Length of the window past --horizon whose maximum demand the window columns score.",
)
@click.option("--models", default=None, help="Comma-separated model names (default: all).")
@click.option(
    "--json",
    "json_path",
    type=OutputFile(),
    default=None,
    help="Also write the report as JSON here.",
)
@log_level_option("INFO")
def evaluate(
    data: Path,
    value_col: str | None,
    step: int | None,
    horizon: int,
    eval_days: float | None,
    refit_every: int,
    hold: int,
    models: str | None,
    json_path: Path | None,
    log_level: str,
) -> None:
    """Rolling-origin evaluation of forecast models on DATA (CSV or Parquet).

    Beside each horizon's scores, the window columns score what a capacity plan sizes for:
    the demand's maximum over the --hold window after --horizon, against the model's window
    forecast (a model with ``target: window``) or the largest of its per-horizon quantiles.
    Window coverage is the fraction of windows whose maximum stayed under the forecast.

    A metric that cannot be computed on this data (MASE on less than a day of history) is
    shown as a dash with the reason below the table, and is null in the JSON with the reason
    under the model's "missing". A seasonal model whose season is longer than the history
    before the scored span is skipped, and the report says why.
    """
    configure_logging(log_level)
    with user_errors(), models_named() as named, progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def callback(name: str, done: int, total: int) -> None:
            named.model = name
            if name not in tasks:
                tasks[name] = bar.add_task(f"evaluating {name}", total=total)
            bar.update(tasks[name], completed=done)

        report = run_evaluation(
            data,
            value_col=value_col,
            step=step,
            horizon=horizon,
            eval_days=eval_days,
            refit_every=refit_every,
            models=given_names(models, "--models"),
            hold=hold,
            callback=callback,
        )
    print_table(console(), table_spec(report))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(dumps(report, indent=2) + "\n")
        click.echo(f"wrote {json_path}")
