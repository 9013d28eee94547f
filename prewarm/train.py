"""``prewarm train``: pull history, fit, evaluate, register, and promote if it wins.

Exit codes (see :mod:`prewarm.exit_codes`)
------------------------------------------
0  success: the candidate became ``champion``, or it was registered with ``--no-promote``,
   or a version trained on the same data and configuration already exists (nothing to do)
1  unexpected failure (e.g. the MLflow store cannot be opened or written)
2  bad configuration (the message names the field and the value)
3  data-source failure: the source could not deliver usable history (server down, timeout,
   HTTP error, malformed answer, a query with no series, or too short / gappy / flat / dead),
   or the Dask scheduler of ``--tune`` does not answer
4  trained and registered, but not promoted: the gate kept the champion
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prewarm.backtest import dask_scheduler_option
from prewarm.exit_codes import ExitCode, epilog, exit_code, fail
from prewarm.options import (
    config_option,
    configure_logging,
    log_level_option,
    stage_progress,
    tracking_uri_option,
)

if TYPE_CHECKING:
    from distributed import Client

# The shadow report exits by the same table under these names.
EXIT_FAILURE = ExitCode.FAILURE
EXIT_CONFIG = ExitCode.CONFIG
EXIT_DATA = ExitCode.DATA


@click.command(
    epilog=epilog(
        OK="promoted, registered with --no-promote, or already trained on this data",
        FAILURE="unexpected failure (e.g. MLflow store unreachable)",
        CONFIG="bad configuration",
        DATA="data-source failure (unreachable, bad answer, no series, unusable history),\n"
        "     or the Dask scheduler does not answer",
        NOT_PROMOTED="trained and registered, not promoted (the champion stays)",
    )
)
@config_option()
@tracking_uri_option()
@click.option("--no-promote", is_flag=True, help="Register the candidate, never move the alias.")
@click.option(
    "--tune",
    is_flag=True,
    help="Backtest each workload first (as `prewarm backtest --config` does) and register "
    "hybrid's setting tuned out of sample as its policy, instead of the config's settings.",
)
@dask_scheduler_option(
    "Run the gate's policy sweeps of the scored workloads, and with --tune the workloads' "
    "backtests (the fit stays here),"
)
@log_level_option(default="INFO")
@click.option("--no-progress", is_flag=True, help="No progress bar (logs only).")
def train(
    config_path: Path,
    tracking_uri: str | None,
    no_promote: bool,
    tune: bool,
    dask_scheduler: str | None,
    log_level: str,
    no_progress: bool,
) -> None:
    """Retrain the forecaster and promote it to `champion` only if it is not worse.

    Pulls each workload's history, validates it, fits and evaluates the candidate
    walk-forward (forecast metrics and backtest cost at SLO), logs everything to MLflow,
    registers a model version, and compares it with the current champion on the same
    recent window. Rerunning on the same data registers nothing new.
    """
    from forecaster.exceptions import ConfigError, PrewarmError
    from prewarm.config_backtest import record_tuning
    from training.compute import dask_client
    from training.config import load_config
    from training.logs import log_console
    from training.pipeline import Outcome, run_training
    from training.settings import resolve_tracking_uri

    configure_logging(log_level)
    log = logging.getLogger("prewarm.train")
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        fail(str(exc), ExitCode.CONFIG)
    try:
        with (
            stage_progress("train", hidden=no_progress) as progress,
            dask_client(dask_scheduler or config.compute.scheduler) as client,
        ):
            policies, backtests = (
                _tuned(config, config_path, client, progress) if tune else (None, {})
            )
            result = run_training(
                config,
                tracking_uri=tracking_uri,
                promote=not no_promote,
                progress=progress,
                policies=policies,
                compute=client,
            )
            if backtests:
                uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
                record_tuning(uri, result, backtests)
    except PrewarmError as exc:
        code = exit_code(exc)
        if code is ExitCode.CONFIG:
            fail(str(exc), code)
        message = f"data-source failure: {exc}" if code is ExitCode.DATA else str(exc)
        if log_console() is None:  # JSON logs: the collector's record; a terminal reads Error:
            log.error("%s", message)
        fail(message, code)
    click.echo(result.message)
    if result.outcome is Outcome.NOT_PROMOTED:
        sys.exit(ExitCode.NOT_PROMOTED)


def _tuned(
    config: Any, config_path: Path, client: Client | None, progress: Any
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``--tune``: each workload's policy with hybrid's out-of-sample tuned settings, and the
    backtest documents of the workloads tuned."""
    from prewarm.config_backtest import backtest_workloads, tuned_policies
    from training.measured import resolve_measured
    from training.pipeline import pull_workloads
    from training.sources import make_source

    source = make_source(config.source.type, config.source)
    try:
        # `auto` values are measured before the backtests, which plan with them; the
        # tuned policies registered hold these measurements.
        config, _ = resolve_measured(config, source)
        history, skipped = pull_workloads(config, source)
    finally:
        source.close()
    kept = skipped.config_without(config)
    documents = backtest_workloads(
        kept, config_path, history, None, progress=progress, client=client
    )
    tuned = tuned_policies(kept, documents)
    for name, policy in tuned.items():
        _log_tuned(name, policy.settings(), documents[name])
    # A skipped workload keeps the file's policy: the training run skips it again.
    return {**config.policies, **tuned}, documents


def _log_tuned(name: str, settings: dict[str, float], document: dict[str, Any]) -> None:
    """What ``--tune`` registers for a workload and what it bought out of sample, against
    the tuned reactive HPA too: a warning where the HPA alone was cheaper, since the
    registered policy is served as it is."""
    from prewarm import backtest_report

    log = logging.getLogger("prewarm.train")
    deployed = document["deployed"]
    hybrid = deployed["policies"]["hybrid"]
    extra = {"workload": name, "settings": settings}
    log.info(
        "workload %s: tuned %s; out of sample %s the SLO (%.2e unserved); %s",
        name,
        settings,
        "meets" if hybrid["meets_slo"] else "misses",
        hybrid["unserved_fraction"],
        backtest_report.savings_line(document),
        extra=extra,
    )
    headroom = backtest_report.headroom_line(document)
    if headroom is not None:
        log.info("workload %s: %s", name, headroom, extra=extra)
    edge = backtest_report.edge_line(document)
    if edge is not None:
        log.warning("workload %s: %s", name, edge, extra=extra)
    if not hybrid["meets_slo"]:
        slo = document["settings"]["slo_unserved_fraction"]
        log.warning(
            "workload %s: the tuned hybrid leaves %.2f%% of the work unserved out of sample, "
            "%.0fx the SLO's %.2f%%: no setting tuned on the first half of the history held it "
            "on the second; it is registered and served as asked. The backtest report "
            "(prewarm backtest --config --report-dir) shows when the work went unserved",
            name,
            100 * hybrid["unserved_fraction"],
            hybrid["unserved_fraction"] / slo,
            100 * slo,
            extra=extra,
        )
    saving = deployed["savings"].get("vs_reactive")
    if saving is not None and saving < 0:
        log.warning(
            "workload %s: the tuned hybrid costs %.1f%% more than the tuned reactive HPA out "
            "of sample, at the same SLO; it is registered as asked, but on this history the "
            "HPA alone is cheaper (docs/which-case.md)",
            name,
            -100 * saving,
            extra=extra,
        )
