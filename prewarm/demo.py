"""``prewarm demo``: the whole loop on a laptop, on embedded defaults.

Trains and registers the forecaster in the local MLflow store from ``examples/demo.yaml``
(shipped in the package as :data:`DEMO_CONFIG`: a real public trace and a synthetic viral
launch, replayed as if live), backtests the savings of every policy on the same history,
writes a report folder and prints what it found and what to try next. Nothing outside this
machine is needed: no Prometheus, no cluster.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prewarm.exit_codes import epilog
from prewarm.options import (
    configure_logging,
    console,
    log_level_option,
    stage_progress,
    user_errors,
)

if TYPE_CHECKING:
    from training.sources.base import Clock

# The demo's config and traces ship inside the package (package data), so the demo runs from
# a wheel as from a checkout: in the repository these are links to examples/demo.yaml and
# the two traces of data/, laid out so that the config's `../data/` paths hold in both.
DEMO_CONFIG = Path(__file__).resolve().parent / "_demo" / "examples" / "demo.yaml"
# What the summary keeps of each policy's deployed numbers.
SUMMARY_KEYS = (
    "settings",
    "cost",
    "unserved_fraction",
    "meets_slo",
    "cold_starts_per_hour",
    "scale_events_per_hour",
)
# The comparisons a headline makes, by savings key.
HEADLINE_BASELINES = (("vs_reactive", "reactive"), ("vs_static", "static"))


def run_demo(
    config_path: Path,
    out: Path,
    tracking_uri: str | None,
    progress: Any = None,
    clock: Clock | None = None,
) -> dict[str, Any]:
    """Backtest every workload, register the tuned policies with the model, write the report;
    return the summary.

    Each workload's hybrid settings are tuned on the first half of the backtest's scored span
    and scored on the second (out of sample); those settings are the policy training
    registers and ``prewarm serve`` publishes, so the savings printed are those of what is
    served. ``clock`` is the replay's current time (default: the wall clock); the replay
    moves the traces by whole weeks only, so any clock gives the same summary.
    """
    from prewarm.config_backtest import backtest_workloads, record_tuning, tuned_policies
    from training.config import load_config
    from training.documents import dumps
    from training.pipeline import pull_history, run_training
    from training.settings import resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    # One source for the backtest and training: both read the same window of the replay.
    source = make_source(config.source.type, config.source, clock=clock)
    try:
        history = pull_history(config, source)
        out.mkdir(parents=True, exist_ok=True)
        documents = backtest_workloads(config, config_path, history, out, progress=progress)
        served = tuned_policies(config, documents)
        trained = run_training(
            config, tracking_uri=uri, progress=progress, source=source, policies=served
        )
        record_tuning(uri, trained, documents)
    finally:
        source.close()
    summary = {
        "tracking_uri": uri,
        "tuning_margin": config.evaluation.tuning_margin,
        "registered_model": trained.registered_model,
        "training": {
            "outcome": str(trained.outcome),
            "version": trained.version,
            "champion": trained.champion_after,
            "message": trained.message,
        },
        "workloads": {
            name: _workload_summary(document, served[name].settings())
            for name, document in documents.items()
        },
    }
    (out / "summary.json").write_text(dumps(summary, indent=2) + "\n")
    (out / "README.md").write_text(_markdown(summary))
    return summary


def _workload_summary(document: dict[str, Any], served: dict[str, float]) -> dict[str, Any]:
    deployed = document["deployed"]
    return {
        "slo_unserved_fraction": document["settings"]["slo_unserved_fraction"],
        "served_settings": served,
        "tuning": deployed["tuning"],
        "validation": deployed["validation"],
        "savings": deployed["savings"],
        "deployed": {
            policy: {key: numbers[key] for key in SUMMARY_KEYS}
            for policy, numbers in deployed["policies"].items()
        },
        "in_sample_savings_at_slo": document["savings_at_slo"],
    }


def _cell(key: str, policy: str, numbers: dict[str, Any]) -> str:
    """A saving of hybrid's, or why there is none: the side that missed the SLO."""
    from prewarm.backtest_report import missed_slo

    saving = numbers["savings"][key]
    if saving is not None:
        return f"{saving:+.1%}"
    return f"none: {missed_slo(numbers['deployed'], policy)}"


def _versus(key: str, policy: str, numbers: dict[str, Any]) -> str:
    """``saves x% vs reactive`` (or costs more), or that the other policy misses the SLO."""
    from prewarm.backtest_report import missed_slo

    saving = numbers["savings"][key]
    if saving is None:  # hybrid met the SLO (the caller's case): the other side missed it
        return missed_slo(numbers["deployed"], policy)
    if saving >= 0:
        return f"saves {saving:.1%} vs {policy}"
    return f"costs {-saving:.1%} more than {policy}"


def _markdown(summary: dict[str, Any]) -> str:
    from forecaster.backtest.tuning import rule_text
    from prewarm import backtest_report

    lines = [
        "# prewarm demo",
        "",
        f"Model `{summary['registered_model']}`: {summary['training']['message']}",
        "",
        "| workload | saving vs reactive | vs static | vs seasonal-naive | above oracle |",
        "|---|---|---|---|---|",
    ]
    for name, numbers in summary["workloads"].items():
        lines.append(
            f"| [{name}]({name}/{backtest_report.MARKDOWN_NAME}) "
            f"| {_cell('vs_reactive', 'reactive', numbers)} "
            f"| {_cell('vs_static', 'static', numbers)} "
            f"| {_cell('vs_seasonal_naive', 'seasonal-naive', numbers)} "
            f"| {_cell('oracle_gap', 'oracle', numbers)} |"
        )
    lines += [
        "",
        "Savings are out of sample and of the served configuration: every policy's setting is "
        f"its cheapest that {rule_text(summary['tuning_margin'])} on the first half of the "
        "scored span, scored on the second; hybrid's tuned setting is the policy registered "
        "with the model and published by `prewarm serve`.",
    ]
    lines += [f"- {name}: {_headline(numbers)}" for name, numbers in summary["workloads"].items()]
    return "\n".join(lines) + "\n"


def _headline(numbers: dict[str, Any]) -> str:
    """One sentence on a workload: what the served hybrid cost out of sample against the
    others, or how close every policy came when it missed the SLO."""
    slo = numbers["slo_unserved_fraction"]
    deployed = numbers["deployed"]
    hybrid = deployed["hybrid"]
    churn = (
        f"scale events/h: hybrid {hybrid['scale_events_per_hour']:.1f}, "
        f"reactive {deployed['reactive']['scale_events_per_hour']:.1f}"
        if "reactive" in deployed
        else f"scale events/h: hybrid {hybrid['scale_events_per_hour']:.1f}"
    )
    if not hybrid["meets_slo"]:
        closest = ", ".join(
            f"{policy} {row['unserved_fraction']:.2%}"
            for policy, row in sorted(deployed.items(), key=lambda kv: kv[1]["unserved_fraction"])
            if policy != "oracle"
        )
        return (
            f"the served hybrid misses the {slo:.1%} SLO out of sample; unserved on "
            f"validation at each policy's tuned setting: {closest}; {churn}"
        )
    compared = [
        _versus(key, policy, numbers) for key, policy in HEADLINE_BASELINES if policy in deployed
    ]
    others = [
        p for p, row in deployed.items() if row["meets_slo"] and p not in ("hybrid", "oracle")
    ]
    lead = "only hybrid meets" if not others else "hybrid meets"
    gap = numbers["savings"]["oracle_gap"]
    oracle = "" if gap is None else f"; {gap:+.1%} above the perfect-foresight oracle"
    return (
        f"{lead} the {slo:.1%} SLO out of sample, at cost {hybrid['cost']:,.0f}: "
        f"{'; '.join(compared)}{oracle}; {churn}"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _program(name: str) -> str:
    """How to call this environment's ``name`` from a fresh shell: bare when it is on PATH."""
    here = Path(sys.executable).parent / name
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == here.resolve():
        return name
    try:
        return str(here.relative_to(Path.cwd()))
    except ValueError:
        return str(here)


def _next_steps(summary: dict[str, Any], config_path: Path, tracking_uri: str | None) -> str:
    uri = summary["tracking_uri"]
    # serve reads the same store as the demo only when given the same --tracking-uri
    store = "" if tracking_uri is None else f" --tracking-uri {uri}"
    mlflow, prewarm = _program("mlflow"), _program("prewarm")
    return "\n".join(
        [
            "Next:",
            f"  {mlflow} ui --backend-store-uri {uri}   # runs, metrics, plots, the champion",
            f"  {prewarm} serve --config {_shown(config_path)}{store}   # the traces as live data",
            "  curl -s 'http://127.0.0.1:8080/apis/external.metrics.k8s.io/v1beta1/namespaces/"
            "default/prewarm_desired_replicas?labelSelector=workload%3Dviral-launch'",
        ]
    )


@click.command(
    epilog=epilog(
        OK="report written",
        CONFIG="bad configuration or option",
        DATA="a trace cannot be read or holds values out of range",
    )
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("prewarm-demo"),
    show_default=True,
    help="Report folder (Markdown, PNG plots, JSON per workload).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEMO_CONFIG,
    show_default=True,
    help="Demo configuration (a replay source and a local MLflow store).",
)
@click.option("--tracking-uri", default=None, help="MLflow store (default: the config's).")
@log_level_option(default="WARNING")  # the bar shows the stages; the summary says the rest
def demo(out: Path, config_path: Path, tracking_uri: str | None, log_level: str) -> None:
    """Train, register, backtest and report on the shipped traces, then say what to try."""
    configure_logging(log_level)
    with user_errors(), stage_progress("demo") as progress:
        summary = run_demo(config_path, out, tracking_uri, progress)
    show = console()
    # soft_wrap: sentences and commands are left whole for the terminal to wrap, so that a
    # copied command or a piped line is never broken by a newline
    show.print(f"[bold]{summary['training']['message']}[/bold]", soft_wrap=True)
    for name, numbers in summary["workloads"].items():
        show.print(f"{name}: {_headline(numbers)}", soft_wrap=True)
    show.print(f"Report: {out / 'README.md'}", soft_wrap=True)
    show.print(_next_steps(summary, config_path, tracking_uri), soft_wrap=True)
