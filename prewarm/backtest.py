"""``prewarm backtest``: what prewarm would have saved on a recorded demand series."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from prewarm.exit_codes import epilog
from prewarm.options import (
    SEED,
    Duration,
    Durations,
    OutputFile,
    OutputFolder,
    PositiveNumber,
    configure_logging,
    given_names,
    log_level_option,
    stage_progress,
    user_errors,
)
from prewarm.spans import duration_text, scored_span
from training.documents import dumps

DEFAULT_POLICIES = "static,reactive,seasonal-naive,predictive,buffered,hybrid,oracle"
DEFAULT_MIN_EVAL = 3 * 86400

F = TypeVar("F", bound=Callable[..., Any])


def dask_scheduler_option(runs: str) -> Callable[[F], F]:
    """``--dask-scheduler ADDRESS``: where the per-workload backtests run (what ``runs``)."""
    return click.option(
        "--dask-scheduler",
        metavar="ADDRESS",
        help=f"{runs} on the workers of the existing Dask scheduler at ADDRESS "
        "(tcp://HOST:8786; default: the config's compute.scheduler, else in this process). "
        "Needs prewarm[dask]; see docs/scale.md.",
    )


@click.command(
    epilog=epilog(
        OK="the table was printed (and the reports written)",
        FAILURE="unexpected failure (e.g. the MLflow store of --config cannot be read)",
        CONFIG="a malformed flag, an unknown name, or a bad --config file",
        DATA="the data cannot be read, holds values out of range, or is too short for the\n"
        "     flags (the message names the row, or the flags to change); or the Dask\n"
        "     scheduler does not answer",
    )
)
# readable=False: an unreadable file is a data error (exit 3) the source names, as a missing one
@click.argument(
    "data", required=False, type=click.Path(dir_okay=False, readable=False, path_type=Path)
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Instead of DATA: replay the workloads of this training config (its source, "
    "model and policies) and score the policy it registers, and the champion's.",
)
@click.option("--workload", help="With --config: only this workload.")
@dask_scheduler_option("With --config: run the workloads' backtests")
@click.option("--tracking-uri", help="With --config: the MLflow store (default: the config's).")
@click.option("--value-col", help="Column holding the demand (default: detected).")
@click.option(
    "--step",
    "step",
    type=Duration(allow_auto=True),
    default="auto",
    show_default=True,
    help="Grid the data is resampled to (auto: the data's own step).",
)
@click.option(
    "--cold-start",
    type=Duration(),
    default="5m",
    show_default=True,
    help="Time from asking for a replica to its serving (node, image pull, weight load).",
)
@click.option(
    "--cold-start-sweep",
    type=Durations(),
    metavar="DURATIONS",
    help="Comma-separated cold starts (e.g. 5s,30s,1m,2m,5m,10m): backtest DATA at each, "
    "instead of --cold-start, and say where prediction stops paying against the tuned "
    "reactive HPA, out of sample. One backtest per cold start; writes --json, not "
    "--report-dir.",
)
@click.option(
    "--capacity-per-replica", type=PositiveNumber(), help="Demand one warm replica serves."
)
@click.option(
    "--peak-replicas",
    type=int,
    default=20,
    show_default=True,
    help="Size capacity so the 99th percentile of demand needs N replicas at utilization 1.",
)
@click.option(
    "--replica-hour-cost",
    type=PositiveNumber(),
    default=4.0,
    show_default=True,
    help="Price of one replica for an hour: costs are replica-hours times it.",
)
@click.option(
    "--slo-latency",
    type=Duration(),
    default="30s",
    show_default=True,
    help="Work served later than this after it arrives counts as unserved.",
)
@click.option(
    "--slo-unserved",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.001,
    show_default=True,
    help="The SLO: the fraction of the work that may go unserved (0.001 = 0.1%).",
)
@click.option(
    "--policies",
    default=DEFAULT_POLICIES,
    show_default=True,
    help="Comma-separated policies to compare (registered names).",
)
@click.option(
    "--hpa-metric",
    type=click.Choice(["demand", "gpu-utilization"]),
    default="demand",
    show_default=True,
    help="What your HPA scales on: with gpu-utilization the backtest also runs the HPA on "
    "DCGM GPU utilization and reports the savings against it.",
)
@click.option(
    "--model",
    default="lightgbm-window",
    show_default=True,
    help="Forecast model (registered name).",
)
@click.option(
    "--train-window",
    type=Duration(),
    default="14d",
    show_default=True,
    help="Trailing window each model is fitted on; shortened, with a note, when it would "
    "leave less than --min-eval to score.",
)
@click.option(
    "--min-eval",
    type=Duration(allow_auto=True),
    default="auto",
    show_default=True,
    help="Least span scored after the first training window. auto: 3d, or on data shorter "
    "than 6 days what is left after 3 days of training, but at least its last 20%.",
)
@click.option(
    "--retrain-every",
    type=Duration(),
    default="1d",
    show_default=True,
    help="How often the walk-forward refits the model on the training window before it.",
)
@click.option(
    "--tuning-margin",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.5,
    show_default=True,
    help="Share of the SLO's unserved work each policy's tuned setting may leave on the "
    "tuning half: 0.5 keeps room for a second half that differs from the first. With "
    "--config: the config's evaluation.tuning_margin.",
)
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the model's random draws and of the simulated cold starts: rerun with "
    "others to see how much a saving depends on them.",
)
@click.option(
    "--n-seeds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Boosters each of the model's quantiles averages, each from its own seed (the "
    "boosting models' n_seeds): a steadier forecast for N times the fit. With --config: "
    "the config's model.params.",
)
@click.option("--json", "json_path", type=OutputFile(), help="Write the report as JSON here.")
@click.option(
    "--report-dir",
    type=OutputFolder(),
    help="Write the report here: Markdown, JSON, the cost/unserved frontier and each "
    "policy's ready capacity around the largest spike (PNG).",
)
@log_level_option("INFO")
def backtest(
    data: Path | None,
    config_path: Path | None,
    workload: str | None,
    dask_scheduler: str | None,
    tracking_uri: str | None,
    value_col: str | None,
    step: int | None,
    cold_start: int,
    cold_start_sweep: tuple[int, ...] | None,
    capacity_per_replica: float | None,
    peak_replicas: int,
    replica_hour_cost: float,
    slo_latency: int,
    slo_unserved: float,
    policies: str,
    hpa_metric: str,
    model: str,
    train_window: int,
    min_eval: int | None,
    retrain_every: int,
    tuning_margin: float,
    seed: int,
    n_seeds: int,
    json_path: Path | None,
    report_dir: Path | None,
    log_level: str,
) -> None:
    """Replay DATA through a simulated cluster under each policy and report the savings.

    The JSON holds data, evaluation, settings, policies (each at its cost-at-SLO point, or
    its best point flagged meets_slo=false), frontier, cost_at_slo, savings_at_slo,
    forecast (mase null with the reason under "missing" when the history is a day or less),
    skipped (policies that need more history than the data has, with the reason) and notes.
    Every report states the scored span (evaluation: start, end, hours) and what of it is
    not scored (evaluation.excluded: the cells, seconds and intervals of gaps in the data
    longer than 3 cells, which the simulation runs through), and deployed: each policy at the
    setting tuned on the first half of the scored span, scored on the second half, with the
    savings computed from it.

    With --config instead of DATA, each workload of a training config is backtested with its
    model and policy; the deployed section then also gives, under "registered", hybrid at
    the champion's registered setting on the same validation window.
    """
    if (data is None) == (config_path is None):
        raise click.UsageError("give DATA or --config, not both and not neither")
    configure_logging(log_level)
    if cold_start_sweep is not None and (config_path is not None or report_dir is not None):
        raise click.UsageError("--cold-start-sweep backtests DATA and writes --json only")
    _check_mode(config_path is not None)
    if config_path is not None:
        with user_errors():
            _backtest_config(
                config_path, workload, dask_scheduler, tracking_uri, json_path, report_dir
            )
        return
    assert data is not None
    with user_errors():
        import numpy as np
        import pandas as pd

        from forecaster.backtest.run import BacktestSettings
        from forecaster.backtest.run import backtest as run_backtest
        from forecaster.exceptions import ConfigError, NotEnoughHistoryError
        from forecaster.frame import infer_step, regularize
        from forecaster.models import MODELS, averages_boosters, make_model
        from forecaster.workload import WorkloadSpec
        from prewarm import backtest_report
        from training.config import with_current_hpa
        from training.sources.file import read_series

        names = with_current_hpa(tuple(given_names(policies, "--policies") or ()), hpa_metric)
        # unknown model names, and boosters asked of a model without any, fail before
        # reading any data
        make_model(model)
        if n_seeds > 1 and not averages_boosters(model):
            boosting = [n for n in sorted(MODELS) if averages_boosters(n)]
            raise click.UsageError(
                f"--n-seeds {n_seeds}: model {model!r} averages no boosters; "
                f"these do: {', '.join(boosting)}"
            )
        model_params = {} if n_seeds == 1 else {"n_seeds": n_seeds}
        frame = read_series(data, value_col=value_col, step=step)
        if frame["series"].nunique() != 1:
            raise ConfigError(
                f"DATA must hold one series, got {frame['series'].nunique()}: "
                f"{sorted(frame['series'].unique())[:5]}"
            )
        grid_step = step or infer_step(frame)
        frame = regularize(frame, grid_step)
        values = frame["value"].to_numpy(dtype=float)
        capacity = capacity_per_replica or _capacity_for(values, peak_replicas)
        spec = WorkloadSpec(
            capacity_per_replica=capacity,
            cold_start=cold_start,
            replica_hour_cost=replica_hour_cost,
            slo_latency_seconds=slo_latency,
            slo_unserved_fraction=slo_unserved,
            max_replicas=_max_replicas(float(np.nanmax(values)), capacity),
        )
        window, notes = fit_train_window(len(values), grid_step, train_window, min_eval)
        settings = BacktestSettings(
            spec,
            policies=names,
            train_window=window,
            retrain_every=retrain_every,
            model=model,
            model_params=model_params,
            seed=seed,
            tuning_margin=tuning_margin,
        )
        times = pd.DatetimeIndex(frame["timestamp"])
        if cold_start_sweep is not None:
            _sweep(values, times, grid_step, settings, cold_start_sweep, data, json_path, notes)
            return
        with stage_progress("backtest") as progress:
            try:
                result = run_backtest(values, times, grid_step, settings, progress)
            except NotEnoughHistoryError as exc:
                raise _with_window(exc, window) from exc
        document = backtest_report.to_json(result, {"path": str(data)}, notes)
        backtest_report.print_table(document)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(dumps(document, indent=2))
        if report_dir is not None:
            backtest_report.write_report(result, document, report_dir, seed)


# Flags of a backtest of DATA, and where a config, which training reads too, sets each.
DATA_ONLY = {
    "value_col": "source.value_col",
    "step": "source.step",
    "cold_start": "each workload's capacity.cold_start",
    "capacity_per_replica": "each workload's capacity.capacity_per_replica",
    "peak_replicas": "each workload's capacity.capacity_per_replica",
    "replica_hour_cost": "each workload's capacity.replica_hour_cost",
    "slo_latency": "each workload's capacity.slo_latency",
    "slo_unserved": "each workload's capacity.slo_unserved_fraction",
    "policies": "evaluation.policies",
    "hpa_metric": "each workload's hpa_metric",
    "model": "model.name",
    "train_window": "evaluation.train_window",
    "min_eval": "evaluation.window and folds",
    "retrain_every": "nothing: a config's backtest retrains as training does",
    "tuning_margin": "evaluation.tuning_margin",
    "seed": "evaluation.seed",
    "n_seeds": "model.params.n_seeds",
}
# Flags of a backtest of --config's workloads.
CONFIG_ONLY = ("workload", "tracking_uri", "dask_scheduler")


def _check_mode(with_config: bool) -> None:
    """A flag given on the command line that the chosen mode (DATA or --config) would
    ignore is a usage error, naming where the config sets it."""
    context = click.get_current_context()
    given = [
        param
        for param in context.command.params
        if context.get_parameter_source(param.name or "") is click.core.ParameterSource.COMMANDLINE
    ]
    for param in given:
        flag = param.opts[0]
        if with_config and param.name in DATA_ONLY:
            raise click.UsageError(
                f"{flag} backtests DATA; with --config the config sets it "
                f"({DATA_ONLY[param.name]}), as training reads it"
            )
        if not with_config and param.name in CONFIG_ONLY:
            raise click.UsageError(f"{flag} goes with --config, not DATA")


def _with_window(exc: Exception, window: int) -> Exception:
    """A too-short history's error, naming the training window and the flags that set it."""
    from forecaster.exceptions import NotEnoughHistoryError

    return NotEnoughHistoryError(
        f"{exc} (training window {duration_text(window)}: change --train-window or --min-eval)"
    )


def _sweep(
    values: Any,
    times: Any,
    step: int,
    settings: Any,
    cold_starts: tuple[int, ...],
    data: Path,
    json_path: Path | None,
    notes: list[str],
) -> None:
    """``--cold-start-sweep``: the backtest at each cold start, the verdict per cold start
    and where prediction stops paying (:mod:`prewarm.payoff`)."""
    from forecaster.exceptions import NotEnoughHistoryError
    from prewarm import payoff, tables
    from prewarm.options import console

    with stage_progress("cold-start sweep") as progress:
        try:
            rows = payoff.sweep(values, times, step, settings, cold_starts, progress)
        except NotEnoughHistoryError as exc:
            raise _with_window(exc, settings.train_window) from exc
    out = console()
    tables.print_table(out, payoff.sweep_table(rows))
    for note in notes:
        out.print(note, markup=False, highlight=False, soft_wrap=True)
    if json_path is not None:
        document = {
            "data": {"path": str(data)},
            "tuning_margin": settings.tuning_margin,
            "cold_starts": {str(c): row for c, row in rows.items()},
            "where_it_stops": payoff.where_it_stops(payoff.verdicts(rows)),
            "notes": notes,
        }
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(dumps(document, indent=2))


def _backtest_config(
    config_path: Path,
    workload: str | None,
    dask_scheduler: str | None,
    tracking_uri: str | None,
    json_path: Path | None,
    report_dir: Path | None,
) -> None:
    """``--config``: every workload (or one) of a training config, tuned and registered."""
    from forecaster.exceptions import ConfigError
    from prewarm.config_backtest import backtest_workloads, print_report
    from prewarm.manifests import registered_policies
    from training.compute import dask_client
    from training.config import load_config
    from training.measured import resolve_measured
    from training.pipeline import pull_history
    from training.settings import resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    if workload is not None:
        names = [w.name for w in config.workloads]
        if workload not in names:
            raise ConfigError(f"--workload {workload!r} is not in the config; workloads: {names}")
        config = config.model_copy(
            update={"workloads": [w for w in config.workloads if w.name == workload]}
        )
    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    champion = registered_policies(config, uri)
    # Connected before the pull: an unreachable scheduler fails before minutes of fetching.
    with dask_client(dask_scheduler or config.compute.scheduler) as client:
        source = make_source(config.source.type, config.source)
        try:
            # `auto` cold starts and capacities are measured as `prewarm train` measures them.
            config, _ = resolve_measured(config, source)
            history = pull_history(config, source)
        finally:
            source.close()
        with stage_progress("backtest") as progress:
            documents = backtest_workloads(
                config,
                config_path,
                history,
                report_dir,
                registered=None if champion is None else champion.by_workload,
                version=None if champion is None else champion.origin,
                progress=progress,
                client=client,
            )
    print_report(documents, report_dir)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(dumps(documents, indent=2))


def fit_train_window(
    n: int, step: int, train_window: int, min_eval: int | None
) -> tuple[int, list[str]]:
    """The training window (seconds) that leaves ``n`` data steps at least the minimum
    scored span, and a note when ``train_window`` had to be shortened for it.

    ``min_eval=None`` is ``auto``: 3 days, shortened on short data (see
    :func:`prewarm.spans.scored_span`).

    Raises
    ------
    NotEnoughHistoryError
        When the minimum leaves fewer than two data steps to train on.
    """
    from forecaster.exceptions import NotEnoughHistoryError

    total = n * step
    least = scored_span(total, DEFAULT_MIN_EVAL) if min_eval is None else min_eval
    room = (n - math.ceil(least / step)) * step
    if train_window <= room:
        return train_window, []
    if room < 2 * step:
        raise NotEnoughHistoryError(
            f"the data spans {duration_text(total)}: too short to train on anything before "
            f"scoring {duration_text(least)}; lower --min-eval (or give more data)"
        )
    return room, [
        f"Training window shortened from {duration_text(train_window)} to "
        f"{duration_text(room)} so that at least {duration_text(least)} is scored "
        "(--train-window, --min-eval)."
    ]


def _max_replicas(peak: float, capacity: float) -> int:
    """Room for the peak at half a replica's capacity, within the bound every spec obeys.

    Raises
    ------
    DataValidationError
        When the peak would need more than :data:`forecaster.workload.MAX_REPLICAS`: one
        outlier far above the rest, or a capacity per replica far too small.
    """
    from forecaster.exceptions import DataValidationError
    from forecaster.workload import MAX_REPLICAS

    needed = max(2, math.ceil(peak / (capacity * 0.5)) + 1)
    if needed > MAX_REPLICAS:
        raise DataValidationError(
            f"the peak demand {peak:g} at {capacity:g} per replica would need {needed:,} "
            f"replicas, more than the limit of {MAX_REPLICAS:,}: check the data for an outlier "
            "or give a larger --capacity-per-replica"
        )
    return needed


def _capacity_for(values: Any, peak_replicas: int) -> float:
    import numpy as np

    from forecaster.exceptions import ConfigError, DataValidationError

    if peak_replicas < 1:
        raise ConfigError(f"`--peak-replicas` must be >= 1, got {peak_replicas}")
    p99 = float(np.nanquantile(values, 0.99))
    if not p99 > 0:
        raise DataValidationError(
            f"cannot size replicas: the 99th percentile of demand is {p99}; "
            "give --capacity-per-replica"
        )
    return p99 / peak_replicas
