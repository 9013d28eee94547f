"""``prewarm evaluate``: how good is the forecast on my data?"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from prewarm.options import Duration, console, progress_bar, split_names, user_errors

DEFAULT_QUANTILES = (0.5, 0.9)


def horizon_cells(horizon_seconds: int, step: int) -> int:
    """Horizon in grid cells: at least one, rounded up to a whole cell."""
    return max(1, math.ceil(horizon_seconds / step))


def season_cells(step: int) -> int:
    """One day of cells for sub-daily data, one week for daily data."""
    return 86400 // step if step < 86400 else max(1, 7 * 86400 // step)


def run_evaluation(
    data: Path,
    *,
    value_col: str | None,
    step: int | None,
    horizon: int,
    eval_days: float,
    refit_every: int,
    models: list[str] | None,
    callback: Any = None,
) -> dict[str, Any]:
    """Evaluate the named models on ``data``; return the JSON-ready report."""
    from forecaster.evaluation import RollingOrigin, evaluate
    from forecaster.exceptions import ConfigError
    from forecaster.models import MODELS, make_model
    from training.sources.file import load_history

    history = load_history(data, step=step, value_col=value_col)
    cells = horizon_cells(horizon, history.step)
    names = models or list(MODELS)
    estimators = {
        name: make_model(name, horizons=(cells,), quantiles=DEFAULT_QUANTILES) for name in names
    }
    eval_cells = round(eval_days * 86400 / history.step)
    refit_cells = max(1, round(refit_every / history.step))
    if eval_cells < 1:
        raise ConfigError(f"`--eval-days` {eval_days!r} is shorter than one step of the data")
    result = evaluate(
        history.frame,
        estimators,
        RollingOrigin(horizon=cells, eval_cells=eval_cells, refit_every=refit_cells),
        step=history.step,
        season=season_cells(history.step),
        quantiles=DEFAULT_QUANTILES,
        progress=callback,
    )
    return {
        "data": {"path": str(data), "rows": history.rows, "step_seconds": history.step},
        "horizon_seconds": result.horizon_seconds,
        "horizon_cells": cells,
        "evaluation": {
            "start": result.start.isoformat(),
            "end": result.end.isoformat(),
            "origins": result.origins,
            "refit_every_seconds": refit_cells * history.step,
        },
        "models": {name: _model_entry(row) for name, row in result.scores.iterrows()},
    }


def _model_entry(row: Any) -> dict[str, Any]:
    levels = [f"{q:g}" for q in DEFAULT_QUANTILES]
    return {
        "mae": row["mae"],
        "rmse": row["rmse"],
        "mase": row["mase"],
        "peak_underforecast": row["peak_underforecast"],
        "pinball": {q: row[f"pinball_{q}"] for q in levels},
        "relative_pinball": {q: row[f"relative_pinball_{q}"] for q in levels},
        "coverage": {q: row[f"coverage_{q}"] for q in levels},
        "seconds": row["fit_seconds"] + row["predict_seconds"],
    }


def render_table(report: dict[str, Any]) -> Any:
    """The report's models as a rich table."""
    from rich.table import Table

    horizon = report["horizon_seconds"]
    table = Table(
        title=f"Forecast at {horizon // 60} min ahead, {report['evaluation']['origins']} origins "
        f"({report['evaluation']['start'][:16]} .. {report['evaluation']['end'][:16]})"
    )
    table.add_column("model", no_wrap=True)
    for header in ("MAE", "MASE", "pinball q0.5", "pinball q0.9", "rel q0.5", "rel q0.9"):
        table.add_column(header, justify="right")
    table.add_column("cov q0.9", justify="right")
    table.add_column("seconds", justify="right")
    best = min(report["models"].values(), key=lambda m: m["pinball"]["0.9"])
    for name, m in report["models"].items():
        style = "bold green" if m is best else None
        table.add_row(
            name,
            f"{m['mae']:.4g}",
            f"{m['mase']:.3f}",
            f"{m['pinball']['0.5']:.4g}",
            f"{m['pinball']['0.9']:.4g}",
            f"{m['relative_pinball']['0.5']:.3f}",
            f"{m['relative_pinball']['0.9']:.3f}",
            f"{m['coverage']['0.9']:.3f}",
            f"{m['seconds']:.1f}",
            style=style,
        )
    return table


@click.command()
@click.argument("data", type=click.Path(path_type=Path))
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
    type=float,
    default=7.0,
    show_default=True,
    help="Length of the evaluation window at the end of the data.",
)
@click.option(
    "--refit-every",
    type=Duration(),
    default="1d",
    show_default=True,
    help="Models are refitted this often on all data before.",
)
@click.option("--models", default=None, help="Comma-separated model names (default: all).")
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the report as JSON here.",
)
def evaluate(
    data: Path,
    value_col: str | None,
    step: int | None,
    horizon: int,
    eval_days: float,
    refit_every: int,
    models: str | None,
    json_path: Path | None,
) -> None:
    """Rolling-origin evaluation of forecast models on DATA (CSV or Parquet)."""
    with user_errors(), progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def callback(name: str, done: int, total: int) -> None:
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
            models=split_names(models),
            callback=callback,
        )
    console().print(render_table(report))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        click.echo(f"wrote {json_path}")
