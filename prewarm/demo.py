"""``prewarm demo``: the whole loop on a laptop, on embedded defaults.

Trains and registers the forecaster in the local MLflow store from ``examples/demo.yaml`` (a
real public trace and a synthetic viral launch, replayed as if live), backtests the savings of
every policy on the same history, writes a report folder and prints what it found and what to
try next. Nothing outside this machine is needed: no Prometheus, no cluster.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from prewarm.options import (
    configure_logging,
    console,
    log_level_option,
    progress_bar,
    user_errors,
)

if TYPE_CHECKING:
    from training.sources.base import Clock

ROOT = Path(__file__).resolve().parents[1]
DEMO_CONFIG = ROOT / "examples" / "demo.yaml"
DAY = 86400


def run_demo(
    config_path: Path,
    out: Path,
    tracking_uri: str | None,
    progress: Any = None,
    clock: Clock | None = None,
) -> dict[str, Any]:
    """Train and register, backtest every workload, write the report; return the summary.

    ``clock`` is the replay's current time (default: the wall clock). The replay moves the
    traces by whole weeks only, so any clock gives the same summary.
    """
    import pandas as pd

    from forecaster.backtest.run import BacktestSettings, backtest
    from prewarm import backtest_report
    from training.config import load_config
    from training.pipeline import pull_history, run_training
    from training.settings import resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    # One source for training and the backtest: both read the same window of the replay.
    source = make_source(config.source.type, config.source, clock=clock)
    try:
        trained = run_training(config, tracking_uri=uri, progress=progress, source=source)
        history = pull_history(config, source)
    finally:
        source.close()
    out.mkdir(parents=True, exist_ok=True)
    workloads = {}
    for done, (name, spec) in enumerate(config.specs.items()):
        part = history.frame[history.frame["series"] == name]
        times = pd.DatetimeIndex(part["timestamp"])
        settings = BacktestSettings(
            spec=spec,
            train_window=config.evaluation.train_window,
            retrain_every=7 * DAY,
            model=config.model.name,
            seed=config.evaluation.seed,
        )
        result = backtest(part["value"].to_numpy(), times, history.step, settings)
        info = {
            "path": str(config_path),
            "workload": name,
            "rows": len(part),
            "step_seconds": history.step,
            "start": times[0].isoformat(),
            "end": times[-1].isoformat(),
        }
        document = backtest_report.to_json(result, info)
        backtest_report.write_report(result, document, out / name, settings.seed)
        workloads[name] = {
            "slo_unserved_fraction": spec.slo_unserved_fraction,
            "cost_at_slo": document["cost_at_slo"],
            "savings_at_slo": document["savings_at_slo"],
            "unserved_fraction": {
                policy: numbers["unserved_fraction"]
                for policy, numbers in document["policies"].items()
            },
        }
        if progress is not None:
            progress("backtest", done + 1, len(config.specs))
    summary = {
        "tracking_uri": uri,
        "registered_model": trained.registered_model,
        "training": {
            "outcome": str(trained.outcome),
            "version": trained.version,
            "champion": trained.champion_after,
            "message": trained.message,
        },
        "workloads": workloads,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "README.md").write_text(_markdown(summary))
    return summary


def _cell(savings: float | None, policy: str, numbers: dict[str, Any]) -> str:
    """A saving of hybrid's, or why there is none: the policy that missed the SLO."""
    if savings is not None:
        return f"{savings:.0%}"
    missed = "hybrid" if numbers["cost_at_slo"].get("hybrid") is None else policy
    return f"none: {missed} misses the SLO ({numbers['unserved_fraction'][missed]:.2%} unserved)"


def _markdown(summary: dict[str, Any]) -> str:
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
        s = numbers["savings_at_slo"]
        lines.append(
            f"| [{name}]({name}/{backtest_report.MARKDOWN_NAME}) "
            f"| {_cell(s['vs_reactive'], 'reactive', numbers)} "
            f"| {_cell(s['vs_static'], 'static', numbers)} "
            f"| {_cell(s['vs_seasonal_naive'], 'seasonal-naive', numbers)} "
            f"| {_cell(s['oracle_gap'], 'oracle', numbers)} |"
        )
    lines += ["", "Savings are at the SLO: each policy at its cheapest setting that meets it."]
    lines += [f"- {name}: {_headline(numbers)}" for name, numbers in summary["workloads"].items()]
    return "\n".join(lines) + "\n"


def _headline(numbers: dict[str, Any]) -> str:
    """One sentence on a workload: what hybrid costs at the SLO against the others' best, or
    how close every policy came when hybrid cannot meet it."""
    slo = numbers["slo_unserved_fraction"]
    unserved = numbers["unserved_fraction"]
    hybrid = numbers["cost_at_slo"].get("hybrid")
    if hybrid is None:
        closest = ", ".join(
            f"{policy} {unserved[policy]:.2%}"
            for policy in sorted(unserved, key=unserved.__getitem__)
            if policy != "oracle"
        )
        return (
            f"no setting of hybrid meets the {slo:.1%} SLO; the work each policy's closest "
            f"setting leaves unserved: {closest}"
        )
    s = numbers["savings_at_slo"]
    compared = []
    for key, policy in (("vs_reactive", "reactive"), ("vs_static", "static")):
        if s[key] is None:
            compared.append(f"{policy} cannot meet it (its best leaves {unserved[policy]:.2%})")
        else:
            compared.append(f"saves {s[key]:.0%} vs {policy}")
    met_by_others = [
        p for p, cost in numbers["cost_at_slo"].items() if cost is not None and p != "hybrid"
    ]
    lead = "only hybrid meets" if met_by_others == ["oracle"] else "hybrid meets"
    return (
        f"{lead} the {slo:.1%} SLO, at cost {hybrid:,.0f}: {'; '.join(compared)}; "
        f"{s['oracle_gap']:.0%} above the perfect-foresight oracle"
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


@click.command()
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
    with user_errors(), progress_bar() as bar:
        task = bar.add_task("demo", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        summary = run_demo(config_path, out, tracking_uri, progress)
    show = console()
    # soft_wrap: sentences and commands are left whole for the terminal to wrap, so that a
    # copied command or a piped line is never broken by a newline
    show.print(f"[bold]{summary['training']['message']}[/bold]", soft_wrap=True)
    for name, numbers in summary["workloads"].items():
        show.print(f"{name}: {_headline(numbers)}", soft_wrap=True)
    show.print(f"Report: {out / 'README.md'}", soft_wrap=True)
    show.print(_next_steps(summary, config_path, tracking_uri), soft_wrap=True)
