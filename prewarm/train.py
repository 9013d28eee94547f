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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

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

    from forecaster.workload import WorkloadPolicy
    from training.rotation import TuningRotation

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
@click.option(
    "--tune-limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --tune: backtest at most N workloads this run (new ones, then those whose "
    "policy changed, then those whose settings no backtest has scored, then a rotation by the "
    "data's day); the others keep the champion's tuned settings. Bounds the run's time on a "
    "large fleet (docs/training.md).",
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
    tune_limit: int | None,
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
    if tune_limit is not None and not tune:
        fail("--tune-limit bounds the backtests of --tune: give --tune too", ExitCode.CONFIG)
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        fail(str(exc), ExitCode.CONFIG)
    try:
        with (
            stage_progress("train", hidden=no_progress) as progress,
            dask_client(dask_scheduler or config.compute.scheduler) as client,
        ):
            uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
            tuning = (
                _tuned(config, config_path, client, progress, _reference(config, uri, tune_limit))
                if tune
                else None
            )
            result = run_training(
                config,
                tracking_uri=tracking_uri,
                promote=not no_promote,
                progress=progress,
                policies=None if tuning is None else tuning.policies,
                compute=client,
            )
            if tuning is not None:
                record_tuning(uri, result, tuning.documents, tuning.turn)
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


@dataclass(frozen=True)
class _Reference:
    """What ``--tune-limit`` ranks the fleet against: the champion's registered policies,
    those of them no backtest has scored, and where they come from."""

    limit: int | None
    registered: dict[str, WorkloadPolicy] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    origin: str = "no champion"


class _Tuning(NamedTuple):
    """What ``--tune`` decided: every workload's policy to register, the backtest documents
    of the workloads it tuned, and which ones those are."""

    policies: dict[str, WorkloadPolicy]
    documents: dict[str, dict[str, Any]]
    turn: TuningRotation


def _reference(config: Any, uri: str, limit: int | None) -> _Reference:
    """The champion's tuning, read only with a limit (without one every workload is tuned)."""
    from prewarm.manifests import registered_policies
    from training.store import store_client
    from training.tracking import pending_workloads

    champion = None if limit is None else registered_policies(config, uri)
    if champion is None or champion.version is None:
        return _Reference(limit)
    name = config.mlflow.registered_model
    pending = pending_workloads(store_client(uri), name, champion.version)
    return _Reference(
        limit,
        champion.by_workload,
        set(champion.by_workload) if pending is None else pending,
        champion.origin,
    )


def _tuned(
    config: Any,
    config_path: Path,
    client: Client | None,
    progress: Any,
    reference: _Reference,
) -> _Tuning:
    """``--tune``: each workload's policy with hybrid's out-of-sample tuned settings (all of
    them unless ``reference.limit``: then the others keep the champion's tuned settings)."""
    from prewarm.config_backtest import backtest_workloads, tuned_policies
    from training.measured import resolve_measured
    from training.pipeline import pull_workloads
    from training.rotation import rotation
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
    day = history.frame["timestamp"].max().toordinal()
    turn = rotation(kept.policies, reference.registered, reference.pending, reference.limit, day)
    _log_rotation(turn, reference)
    chosen = kept.model_copy(
        update={"workloads": [w for w in kept.workloads if w.name in turn.tuned]}
    )
    documents = backtest_workloads(
        chosen, config_path, history, None, progress=progress, client=client
    )
    tuned = tuned_policies(chosen, documents)
    for name, policy in tuned.items():
        _log_tuned(name, policy.settings(), documents[name])
    # A skipped workload keeps the file's policy: the training run skips it again.
    return _Tuning({**config.policies, **turn.kept, **tuned}, documents, turn)


def _log_rotation(turn: TuningRotation, reference: _Reference) -> None:
    """What a ``--tune-limit`` run tunes and what the others keep, warning where a kept
    policy's settings are not what a backtest scored."""
    from forecaster.exceptions import shown
    from training.rotation import CHANGED, NEW, PENDING

    if reference.limit is None:
        return
    log = logging.getLogger("prewarm.train")
    log.info(
        "--tune-limit %d: tuning %d of %d workloads this run; %s",
        reference.limit,
        len(turn.tuned),
        len(turn.reasons),
        f"the other {len(turn.kept)} keep their settings in {reference.origin}"
        if reference.registered
        else "no champion: the others are registered with the config's settings",
    )
    for why, what in (
        (NEW, "are new: they are registered with the config's settings, as train without "
         "--tune registers them"),
        (CHANGED, "changed since they were tuned: they keep their tuned settings on the "
         "changed policy, which no backtest has scored"),
        (PENDING, "keep registered settings that no backtest has scored"),
    ):  # fmt: skip
        left = [name for name in turn.pending if turn.reasons[name] == why]
        if left:
            log.warning(
                "workloads %s, past --tune-limit %d this run, %s; the next run tunes them "
                "before the rotation",
                shown(left),
                reference.limit,
                what,
            )


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
