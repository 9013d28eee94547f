"""Backtest the workloads of a training config: what ``prewarm demo`` and
``prewarm backtest --config`` report.

Each workload's history comes from the config's source, over the window training pulls; the
forecasts come from the configured model. Every policy is tuned out of sample
(:mod:`forecaster.backtest.tuning`); hybrid's tuned setting is the policy training would
register. When the store has a champion with registered policies, hybrid is also scored at
the registered setting, on the same validation window: the numbers of what is served now.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster.backtest.run import BacktestResult, BacktestSettings, backtest
from forecaster.backtest.tuning import deployed_savings, score_setting
from forecaster.exceptions import PrewarmError
from forecaster.workload import WorkloadPolicy
from prewarm import backtest_report, tables
from prewarm.options import console
from prewarm.spans import duration_text
from training.compute import map_calls
from training.config import TrainConfig, with_current_hpa
from training.pipeline import MODEL_TAGS, TAG_CHARS, Outcome, TrainResult, model_params
from training.rotation import TuningRotation
from training.sources import FetchedHistory

if TYPE_CHECKING:
    from distributed import Client

DAY = 86400
# A workload's backtest takes seconds even on a few days of data (5.2 s on 5 days at 5-minute
# steps, 46.5 s on 30; over a minute on 30 days at 1 minute), a local worker process about 2 s
# to start: from two backtests on, a worker process per CPU repays its start.
LOCAL_BACKTESTS = 2
RETRAIN_EVERY = 7 * DAY
TIERS = {1: "latency critical", 2: "default", 3: "batch"}
TIERS_MARKDOWN = "tiers.md"


def backtest_workloads(
    config: TrainConfig,
    config_path: Path,
    history: FetchedHistory,
    out: Path | None,
    *,
    registered: Mapping[str, WorkloadPolicy] | None = None,
    version: str | None = None,
    progress: Any = None,
    client: Client | None = None,
) -> dict[str, dict[str, Any]]:
    """Each workload's backtest document (see :func:`prewarm.backtest_report.to_json`),
    with its report written below ``out`` when given.

    ``registered`` (of model ``version``) adds ``deployed.registered``: hybrid at the
    registered policy's setting, and its savings against the others' tuned settings.
    With a Dask ``client`` the backtests run on its cluster's workers (see
    :mod:`training.compute`); the documents are the same as without.
    """
    policies = config.policies
    calls = {
        name: (name, *_backtest_call(config, history, name, policy))
        for name, policy in policies.items()
    }
    documents = {}
    backtests = map_calls(named_backtest, calls, client, min_local_calls=LOCAL_BACKTESTS)
    for done, (name, result) in enumerate(backtests):
        seed = config.evaluation.seed
        document = backtest_report.to_json(result, {"path": str(config_path), "workload": name})
        if registered is not None and name in registered:
            served = score_setting(result.observation, "hybrid", registered[name].settings(), seed)
            document["deployed"]["registered"] = {
                "version": version,
                **backtest_report.deployed_row(served),
                "savings": deployed_savings({**result.deployed, "hybrid": served}),
            }
        if out is not None:
            backtest_report.write_report(result, document, out / name, seed)
        documents[name] = document
        if progress is not None:
            progress("backtest", done + 1, len(policies))
    # On a cluster the backtests complete in any order; the documents keep the config's.
    return {name: documents[name] for name in policies}


def _own_span(part: pd.DataFrame, config: TrainConfig, step: int) -> pd.DataFrame:
    """A workload's rows of the fleet's grid, without the missing cells after its last point
    and no more than half a training window of them before its first.

    The fleet shares one grid: a workload recorded from later on has missing cells before
    its data. A whole training window of them left its first fit nothing to learn from;
    half of one leaves that fit at least half a window of the workload's data, as a gap
    would, and keeps a workload that lacks less than that on the fleet's folds.
    """
    observed = np.flatnonzero(part["value"].notna().to_numpy())
    if not len(observed):
        return part
    start = max(0, int(observed[0]) - config.evaluation.train_window // step // 2)
    return part.iloc[start : int(observed[-1]) + 1]


def named_backtest(name: str, *args: Any) -> BacktestResult:
    """:func:`forecaster.backtest.run.backtest` of workload ``name``, whose errors name it
    (a fleet's backtest fails on one workload's data)."""
    try:
        return backtest(*args)
    except PrewarmError as exc:
        raise type(exc)(f"workload {name!r}: {exc}") from exc


def _backtest_call(
    config: TrainConfig, history: FetchedHistory, name: str, policy: WorkloadPolicy
) -> tuple[np.ndarray, pd.DatetimeIndex, int, BacktestSettings]:
    """The arguments of workload ``name``'s :func:`forecaster.backtest.run.backtest`."""
    part = _own_span(history.frame[history.frame["series"] == name], config, history.step)
    (workload,) = [w for w in config.workloads if w.name == name]
    settings = BacktestSettings(
        spec=policy.spec,
        policies=with_current_hpa(BacktestSettings.policies, workload.hpa_metric),
        train_window=config.evaluation.train_window,
        retrain_every=RETRAIN_EVERY,
        model=config.model.name,
        model_params=model_params(config),
        hold=policy.hold,
        seed=config.evaluation.seed,
        tuning_margin=config.evaluation.tuning_margin,
    )
    return part["value"].to_numpy(), pd.DatetimeIndex(part["timestamp"]), history.step, settings


def tuned_policies(
    config: TrainConfig, documents: Mapping[str, dict[str, Any]]
) -> dict[str, WorkloadPolicy]:
    """Each workload's policy with hybrid's settings as the backtest tuned them: the policy
    to register, so that what is served is what was backtested."""
    return {
        name: policy.tuned(**documents[name]["deployed"]["policies"]["hybrid"]["settings"])
        for name, policy in config.policies.items()
    }


def record_tuning(
    uri: str,
    trained: TrainResult,
    documents: Mapping[str, dict[str, Any]],
    turn: TuningRotation | None = None,
) -> None:
    """``--tune``'s out-of-sample verdicts on the run ``trained`` logged, for the MLflow UI:
    every tuned workload's deployed section as ``tuning/deployed.json``, how many tuned
    settings meet the SLO and cost more than the tuned reactive HPA, hybrid's total cost over
    the reactive HPA's where both meet it, and a tag naming the workloads where the HPA alone
    was cheaper. With ``--tune-limit``'s rotation ``turn``, also how many workloads kept an
    earlier run's settings and, as ``tuning/pending.json``, those whose settings no backtest
    has scored (the next run tunes them first). Nothing when training logged no new run (the
    same data and configuration)."""
    from mlflow.exceptions import MlflowException

    from training.documents import finite
    from training.exceptions import TrackingError
    from training.store import store_client
    from training.tracking import TUNING_DEPLOYED, TUNING_PENDING

    if trained.run_id is None or trained.outcome is Outcome.UNCHANGED:
        return
    deployed = {name: document["deployed"] for name, document in sorted(documents.items())}
    # where both sides held the SLO on validation, as hybrid's savings are computed
    both = {n: d for n, d in deployed.items() if d["savings"].get("vs_reactive") is not None}
    dearer = [name for name, d in both.items() if d["savings"]["vs_reactive"] < 0]
    metrics = {
        "tuning.workloads": float(len(deployed)),
        "tuning.meets_slo": float(
            sum(d["policies"]["hybrid"]["meets_slo"] for d in deployed.values())
        ),
        "tuning.dearer_than_reactive": float(len(dearer)),
    }
    if turn is not None:
        metrics["tuning.kept"] = float(len(turn.kept))
        metrics["tuning.pending"] = float(len(turn.pending))
    if both:
        hybrid = sum(d["policies"]["hybrid"]["cost"] for d in both.values())
        reactive = sum(d["policies"]["reactive"]["cost"] for d in both.values())
        metrics["tuning.vs_reactive"] = 1 - hybrid / reactive
    client = store_client(uri)
    run_id = trained.run_id
    try:
        client.log_dict(run_id, finite(deployed), TUNING_DEPLOYED)
        if turn is not None:
            client.log_dict(run_id, {"workloads": sorted(turn.pending)}, TUNING_PENDING)
        for key, value in metrics.items():
            client.log_metric(run_id, key, value)
        if dearer:
            # bounded like the served-model tags: the artifact names every workload
            named = ", ".join(dearer[:MODEL_TAGS]) + (", ..." if len(dearer) > MODEL_TAGS else "")
            client.set_tag(run_id, "prewarm.tuning.dearer_than_reactive", named[:TAG_CHARS])
    except MlflowException as exc:
        raise TrackingError(f"MLflow refused the tuning record of run {run_id}: {exc}") from exc


def by_tier(documents: Mapping[str, dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """The backtest documents grouped by their workload's tier, tier 1 first, each group in
    the config's order."""
    groups: dict[int, dict[str, dict[str, Any]]] = {}
    for name, document in documents.items():
        groups.setdefault(document["settings"]["tier"], {})[name] = document
    return dict(sorted(groups.items()))


# Columns of a tier's table: header, the workload's value as text from its document.
TIER_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("SLO\nlatency", lambda d: duration_text(d["settings"]["slo_latency_seconds"])),
    ("SLO\nunserved", lambda d: f"{d['settings']['slo_unserved_fraction']:g}"),
    ("hybrid\ncost", lambda d: f"{d['deployed']['policies']['hybrid']['cost']:,.1f}"),
    (
        "hybrid\nunserved",
        lambda d: f"{d['deployed']['policies']['hybrid']['unserved_fraction']:.2e}",
    ),
    ("meets\nSLO", lambda d: "yes" if d["deployed"]["policies"]["hybrid"]["meets_slo"] else "no"),
    ("vs\nreactive", lambda d: _saving(d, "vs_reactive")),
    ("vs\nstatic", lambda d: _saving(d, "vs_static")),
)


def _saving(document: dict[str, Any], key: str) -> str:
    saving = document["deployed"]["savings"].get(key)
    return "-" if saving is None else f"{saving:+.1%}"


def tier_table(tier: int, documents: Mapping[str, dict[str, Any]]) -> tables.TableSpec:
    """One tier's workloads: the SLO each is held to and hybrid's deployed numbers.

    Every workload of a tier is backtested against its own SLO latency; a batch tier's work
    may wait in the queue for minutes and still be served.
    """
    return tables.TableSpec(
        title=f"Tier {tier} ({TIERS.get(tier, 'unknown')}): hybrid deployed, out of sample",
        key="workload",
        headers=tuple(header for header, _ in TIER_COLUMNS),
        rows=[(name, [cell(d) for _, cell in TIER_COLUMNS]) for name, d in documents.items()],
        notes=["-: a side misses the SLO on validation, or did not run"],
    )


def print_report(documents: Mapping[str, dict[str, Any]], report_dir: Path | None) -> None:
    """Each tier's table, then its workloads' tables, tier 1 first; with ``report_dir``,
    the tier tables also go to its ``tiers.md``."""
    out = console()
    groups = by_tier(documents)
    for tier, group in groups.items():
        tables.print_table(out, tier_table(tier, group))
        for name, document in group.items():
            out.print(f"[bold]{name}[/bold] (tier {tier})")
            backtest_report.print_table(document)
            registered = document["deployed"].get("registered")
            if registered is not None:
                line = backtest_report.registered_line(registered)
                out.print(line, soft_wrap=True, markup=False)
    if report_dir is not None:
        sections = [tables.markdown_table(tier_table(t, g)) for t, g in groups.items()]
        report_dir.mkdir(parents=True, exist_ok=True)
        (report_dir / TIERS_MARKDOWN).write_text(
            "# Backtest by tier\n\n" + "\n\n".join(sections) + "\n"
        )
