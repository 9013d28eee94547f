"""``prewarm shadow-report``: the champion replayed over a past period of the cluster's own
Prometheus data, against what the cluster really ran.

Per workload it pulls, over ``[until - since, until)``, the demand on the model's grid (plus
the model's context before the period: ``history_cells_needed`` cells), and per simulation
step (15 s) the replicas the cluster ran (the workload's ``replicas`` query), when
configured the ready ones (``ready_replicas``) and the asks ``prewarm serve --shadow``
recorded (``--asks-query``). The champion forecasts every origin of the period in one
batched predict, each origin from the cells at or before it only (the model's contract) and
with no refit: the backtest's observation of the period with the champion's forecasts. The
actual fleet and the hybrid fleet are scored by :mod:`forecaster.backtest.shadow`, from the
recorded asks when they cover the period and from the replayed ones otherwise. A workload
without a ``replicas`` query is compared with the backtest's reactive HPA at its registered
policy settings. The report says which of each it used.

Exit codes are those of ``prewarm train``: 2 for a bad configuration or option (the message
names it and its value), 3 for a data-source failure (the workload and the query named), 1
for anything else prewarm detects (no champion, an unreadable store).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
import numpy as np
import pandas as pd

from prewarm.exit_codes import ExitCode, epilog, exit_code, fail
from prewarm.options import (
    OutputFile,
    config_option,
    configure_logging,
    log_level_option,
    tracking_uri_option,
)
from training.sources.base import Clock, wall_clock

if TYPE_CHECKING:
    from forecaster.backtest.shadow import OnlineAccuracy, ShadowResult
    from forecaster.policies.base import QuantileForecast
    from forecaster.workload import WorkloadPolicy, WorkloadSpec
    from training.config import TrainConfig, WorkloadConfig
    from training.registry import LoadedModel
    from training.sources import FetchedHistory, HistorySource

log = logging.getLogger("prewarm.shadow")


@dataclass(frozen=True)
class Period:
    """The shadow period ``[start, end)`` on a grid of ``step`` seconds."""

    start: pd.Timestamp
    end: pd.Timestamp
    step: int

    @property
    def cells(self) -> int:
        """Data cells in the period."""
        return int((self.end - self.start).total_seconds()) // self.step


@dataclass(frozen=True)
class WorkloadShadow:
    """One workload's replay and the series its report and plot show."""

    name: str
    result: ShadowResult
    accuracy: OnlineAccuracy
    spec: WorkloadSpec
    notes: tuple[str, ...]


def period_of(since: int, until: pd.Timestamp | None, step: int, clock: Clock) -> Period:
    """``[until - since, until)`` with ``until`` (default ``clock()``) floored to the grid.

    Raises
    ------
    ConfigError
        ``since`` is not a positive whole number of grid steps.
    """
    from forecaster.exceptions import ConfigError
    from forecaster.frame import MAX_GRID_CELLS

    if since <= 0 or since % step:
        raise ConfigError(
            f"`--since` must be a positive multiple of the {step}s grid, got {since}s"
        )
    if since // step > MAX_GRID_CELLS:  # what one series may hold, as every source bounds it
        raise ConfigError(
            f"`--since` spans {since // step:,} steps of {step}s, more than the "
            f"{MAX_GRID_CELLS:,} a series may hold"
        )
    now = clock()
    if until is not None and until > now:
        raise ConfigError(
            f"`--until` {until.isoformat()} is in the future (now: {now.isoformat()})"
        )
    end = (now if until is None else until).floor(f"{step}s")
    return Period(end - pd.Timedelta(seconds=since), end, step)


ASKS_QUERY = 'prewarm_forecast_demand{workload="{workload}"}'
PLACEHOLDER = "{workload}"


def check_asks_query(template: str) -> str:
    """``template`` when it is empty (no recorded asks: they are replayed) or holds
    :data:`PLACEHOLDER`.

    Raises
    ------
    ConfigError
        A template without the placeholder: every workload would read the same series.
    """
    from forecaster.exceptions import ConfigError, shown

    if template and PLACEHOLDER not in template:
        raise ConfigError(
            f"`--asks-query` must contain the {PLACEHOLDER} placeholder (or be empty to "
            f"replay the asks), got {shown(template)}"
        )
    return template


def asks_query_for(template: str, workload: str) -> str | None:
    """The recorded-asks query of ``workload``: ``template`` with :data:`PLACEHOLDER`
    replaced (plainly: PromQL has braces of its own); ``None`` for an empty template."""
    return check_asks_query(template).replace(PLACEHOLDER, workload) or None


def replay_workloads(
    config: TrainConfig,
    loaded: LoadedModel,
    source: HistorySource,
    period: Period,
    asks_query: str = ASKS_QUERY,
) -> dict[str, WorkloadShadow]:
    """Pull, forecast and replay every workload of ``config`` over ``period``; each
    workload's recorded asks are read with ``asks_query`` (see :func:`asks_query_for`)."""
    model = loaded.model
    unknown = [w.name for w in config.workloads if w.name not in model.policies]
    if unknown:
        from forecaster.exceptions import ConfigError

        raise ConfigError(
            f"workloads {unknown} are not in the champion ({loaded.name} v{loaded.version} "
            f"plans {list(model.workloads)}): train it with them first"
        )
    queries = {w.name: asks_query_for(asks_query, w.name) for w in config.workloads}
    context = model.history_cells_needed + 1
    first = period.start - pd.Timedelta(seconds=context * period.step)
    last = period.end - pd.Timedelta(seconds=period.step)  # the period's last cell
    history = source.fetch(
        {w.name: w.demand or w.name for w in config.workloads},
        first,
        last,
        period.step,
        covariates={w.name: dict(w.covariates) for w in config.workloads if w.covariates} or None,
    )
    forecasts = _forecasts(loaded, history, context)
    out = {}
    for workload in config.workloads:
        out[workload.name] = _replay_one(
            source, workload, model.policies[workload.name], history, forecasts[workload.name],
            period, queries[workload.name], config.evaluation.seed,
        )  # fmt: skip
    return out


def _forecasts(
    loaded: LoadedModel, history: FetchedHistory, context: int
) -> dict[str, QuantileForecast]:
    """Each workload's forecasts from every origin in force during the period (origins
    ``context - 1`` .. the period's second-to-last cell), rows aligned to the history's cells,
    in one batched predict."""
    from forecaster.policies.base import QuantileForecast

    forecaster = loaded.model.forecaster
    frame = history.frame
    times = pd.DatetimeIndex(frame["timestamp"].drop_duplicates().sort_values())
    predicted = forecaster.predict(frame, origins=times[context - 1 : -1])
    spanned = forecaster.predict_window(frame, origins=times[context - 1 : -1])
    horizons = tuple(int(h) for h in forecaster.horizons)
    quantiles = tuple(float(q) for q in forecaster.quantiles)
    out = {}
    for name, part in predicted.groupby("series", sort=False):
        # the model's window target, served where it fits the workload's window
        window = None if spanned is None else spanned[spanned["series"] == name]
        out[str(name)] = QuantileForecast.from_long(part, window, times, horizons, quantiles)
    return out


@dataclass(frozen=True)
class _Fleet:
    replicas: np.ndarray | None
    ready: np.ndarray | None
    notes: tuple[str, ...]


def _steps(
    source: HistorySource, workload: str, query: str, period: Period, step: float
) -> pd.Series:
    """``query``'s values per simulation step of the period (NaN where none)."""
    last = period.end - pd.Timedelta(seconds=step)
    fetched = source.fetch({workload: query}, period.start, last, int(step))
    return pd.Series(fetched.frame["value"].to_numpy(dtype=float))


def _fleet(source: HistorySource, workload: WorkloadConfig, period: Period, step: float) -> _Fleet:
    """The measured replicas (and ready ones) per simulation step of the period, or nothing
    without a ``replicas`` query. They are read at the simulation step, not the model's
    grid, so a scale-up shows when the HPA made it (at the scrape resolution of the series).
    Missing steps take the last count measured before them (a count holds until it
    changes)."""
    if workload.replicas is None:
        return _Fleet(None, None, ("no `replicas` query: compared with the simulated reactive "
                                   "HPA at the registered policy settings",))  # fmt: skip
    queries = {"replicas": workload.replicas, "ready_replicas": workload.ready_replicas}
    series, notes = {}, []
    for field, query in queries.items():
        if query is None:
            continue
        values = _steps(source, workload.name, query, period, step)
        missing = int(values.isna().sum())
        if missing:
            notes.append(
                f"`{field}`: {missing} of {len(values)} steps missing, the last count held"
            )
        series[field] = values.ffill().bfill().round().to_numpy()
    return _Fleet(series["replicas"], series.get("ready_replicas"), tuple(notes))


@dataclass(frozen=True)
class _Asks:
    values: np.ndarray | None
    query: str | None


def _recorded_asks(
    source: HistorySource, workload: str, query: str | None, period: Period, step: float
) -> _Asks:
    """The asks ``serve --shadow`` recorded per simulation step (NaN where none), or none
    when the query is disabled or Prometheus holds no such series."""
    from training.exceptions import NoSeriesError

    if query is None:
        return _Asks(None, None)
    try:
        return _Asks(_steps(source, workload, query, period, step).to_numpy(), query)
    except NoSeriesError:
        return _Asks(None, query)


def _asks_note(result: ShadowResult, asks: _Asks) -> str:
    """Which asks the hybrid fleet was built from, and why."""
    from forecaster.backtest.shadow import ASKS_COVERAGE
    from forecaster.exceptions import shown

    share = f"{result.asks_coverage:.1%} of the period's steps"
    if result.asks_source == "recorded":
        return f"asks: recorded by serve --shadow ({shown(asks.query or '')}), {share}"
    if asks.query is None:
        return "asks: replayed from the champion (no recorded-asks query)"
    if asks.values is None:
        return f"asks: replayed from the champion, none recorded ({shown(asks.query)})"
    return (f"asks: replayed from the champion, the recorded ones cover {share} "
            f"(< {ASKS_COVERAGE:.0%})")  # fmt: skip


def _replay_one(
    source: HistorySource,
    workload: WorkloadConfig,
    policy: WorkloadPolicy,
    history: FetchedHistory,
    forecast: QuantileForecast,
    period: Period,
    asks_query: str | None,
    seed: int,
) -> WorkloadShadow:
    """One workload's replay: its demand as the backtest observes it (the context before
    the period, the champion's forecasts), its fleet and its recorded asks."""
    from forecaster.backtest.run import observe, seconds_of_day
    from forecaster.backtest.shadow import online_accuracy, replay, sim_step_for
    from forecaster.exceptions import DataValidationError

    frame = history.frame
    raw = frame.loc[frame["series"] == workload.name, "value"].to_numpy(dtype=float)
    context = len(raw) - period.cells
    notes = []
    gaps = int(np.isnan(raw[context:]).sum())
    if gaps:
        notes.append(f"demand: {gaps} cells of the period missing, replayed interpolated")
    sim_step = sim_step_for(period.step)
    first = frame.loc[frame["series"] == workload.name, "timestamp"].iloc[0]
    obs = observe(
        raw,
        period.step,
        context,
        policy.spec,
        forecast=forecast,
        sim_step=sim_step,
        day_offset=seconds_of_day(first),
    )
    fleet = _fleet(source, workload, period, sim_step)
    asks = _recorded_asks(source, workload.name, asks_query, period, sim_step)
    try:
        result = replay(obs, policy, fleet.replicas, fleet.ready, asks=asks.values, seed=seed)
    except DataValidationError as exc:  # a recorded series the replay cannot read
        raise DataValidationError(f"workload {workload.name!r}: {exc}") from exc
    return WorkloadShadow(
        name=workload.name,
        result=result,
        accuracy=online_accuracy(raw, forecast, policy, period.step),
        spec=policy.spec,
        notes=(*fleet.notes, *notes, _asks_note(result, asks)),
    )


# -- command ---------------------------------------------------------------------------------


@click.command(
    epilog=epilog(
        OK="report written",
        FAILURE="unexpected failure (no champion, MLflow store unreadable, output not writable)",
        CONFIG="bad configuration or option",
        DATA="data-source failure (unreachable, timeout, bad answer, no series)",
    )
)
@config_option("YAML configuration with a prometheus source (see examples/).")
@click.option("--since", default="7d", show_default=True, help="Length of the period replayed.")
@click.option("--until", default=None, help="End of the period (ISO-8601, naive = UTC); now.")
@click.option(
    "--out",
    "out_dir",
    default="shadow-report",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory of the Markdown report, plots and JSON.",
)
@click.option(
    "--json",
    "json_path",
    default=None,
    type=OutputFile(),
    help="Also write the JSON document here.",
)
@click.option(
    "--asks-query",
    default=ASKS_QUERY,
    show_default=True,
    help="PromQL of the forecast demand `prewarm serve --shadow` exported (the metric the "
    "HPA reads), {workload} standing for the workload's name; used when it covers 95% of "
    "the period, else it is replayed. Empty: always replay.",
)
@tracking_uri_option()
@log_level_option(default="WARNING")
def shadow_report(
    config_path: Path,
    since: str,
    until: str | None,
    out_dir: Path,
    json_path: Path | None,
    asks_query: str,
    tracking_uri: str | None,
    log_level: str,
) -> None:
    """Replay the champion over a past period and compare it with what the cluster ran.

    Actual replica-hours, cost and estimated unserved work against the hybrid fleet's (the
    HPA reading prewarm's asks beside its own metrics: the HPA model on the asks, combined
    with the replicas the cluster ran by max, with the cold start), the hours where prewarm
    would have added capacity the HPA lacked, and the online forecast accuracy. The asks are
    those `serve --shadow` recorded when Prometheus holds them, else replayed from the
    champion; the report says which. Nothing is scaled: it only reads Prometheus and the
    MLflow registry.
    """
    configure_logging(log_level)
    run(config_path, since, until, out_dir, json_path, tracking_uri, wall_clock, asks_query)


def run(
    config_path: Path,
    since: str,
    until: str | None,
    out_dir: Path,
    json_path: Path | None,
    tracking_uri: str | None,
    clock: Clock,
    asks_query: str = ASKS_QUERY,
) -> None:
    """The command's body, with the clock that sets the default end of the period."""
    from forecaster.exceptions import PrewarmError
    from prewarm import shadow_report as report

    try:
        config, seconds, end = _inputs(config_path, since, until)
        check_asks_query(asks_query)
        loaded = _champion(config, tracking_uri)
        period = period_of(seconds, end, loaded.step, clock)
        source = _source(config)
        try:
            shadows = replay_workloads(config, loaded, source, period, asks_query)
        finally:
            source.close()
    except PrewarmError as exc:
        code = exit_code(exc)
        if code is ExitCode.DATA:
            log.error("data-source failure: %s", exc)
            fail(f"data-source failure: {exc}", code)
        fail(str(exc), code)
    document = report.to_json(shadows, period, f"{loaded.name} v{loaded.version}")
    try:
        report.write(shadows, document, out_dir, json_path)
    except OSError as exc:
        fail(f"cannot write the report: {exc}", ExitCode.FAILURE)
    report.print_summary(document, out_dir)


def _inputs(
    config_path: Path, since: str, until: str | None
) -> tuple[TrainConfig, int, pd.Timestamp | None]:
    """The config (with a prometheus source), ``--since`` in seconds and ``--until``."""
    from forecaster.duration import parse_duration
    from forecaster.exceptions import ConfigError
    from training.config import PrometheusSourceConfig, load_config

    config = load_config(config_path)
    if not isinstance(config.source, PrometheusSourceConfig):
        raise ConfigError(
            f"{config_path}: source.type must be 'prometheus' for a shadow report (the "
            f"cluster's own data), got {config.source.type!r}"
        )
    seconds = parse_duration(since, name="--since")
    if until is None:
        return config, seconds, None
    try:
        end = pd.Timestamp(until).as_unit("ns")  # past 2262 a nanosecond time overflows
    except ValueError:
        raise ConfigError(
            f"`--until` must be an ISO-8601 time from 1677 to 2262, got {until[:80]!r}"
        ) from None
    return config, seconds, end.tz_localize("UTC") if end.tzinfo is None else end.tz_convert("UTC")


def _champion(config: TrainConfig, tracking_uri: str | None) -> LoadedModel:
    from training.registry import load_champion
    from training.settings import require_store, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    require_store(uri, "shadow-report")
    return load_champion(config.mlflow.registered_model, uri)


def _source(config: TrainConfig) -> HistorySource:
    from training.sources import make_source

    return make_source(config.source.type, config.source)


__all__ = [
    "ASKS_QUERY",
    "Period",
    "WorkloadShadow",
    "asks_query_for",
    "check_asks_query",
    "period_of",
    "replay_workloads",
    "shadow_report",
]
