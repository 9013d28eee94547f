"""``prewarm demo``: the whole loop on a laptop, on embedded defaults.

Trains and registers the forecaster in the local MLflow store from ``examples/demo.yaml`` (a
real public trace and a synthetic viral launch, replayed as if live), backtests the savings of
every policy on the same history, writes a report folder and prints what it found and what to
try next. Nothing outside this machine is needed: no Prometheus, no cluster.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from prewarm.options import console, progress_bar, user_errors

ROOT = Path(__file__).resolve().parents[1]
DEMO_CONFIG = ROOT / "examples" / "demo.yaml"
DAY = 86400


def run_demo(
    config_path: Path, out: Path, tracking_uri: str | None, progress: Any = None
) -> dict[str, Any]:
    """Train and register, backtest every workload, write the report; return the summary."""
    import pandas as pd

    from forecaster.backtest.run import BacktestSettings, backtest
    from prewarm import backtest_report
    from training.config import load_config
    from training.pipeline import pull_history, run_training
    from training.settings import resolve_tracking_uri
    from training.sources import make_source

    config = load_config(config_path)
    uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
    trained = run_training(config, tracking_uri=uri, progress=progress)
    source = make_source(config.source.type, config.source)
    try:
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


def _percent(value: float | None) -> str:
    # None: a policy that never met the SLO has no cost at it to compare with.
    return "n/a" if value is None else f"{value:.0%}"


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
            f"| [{name}]({name}/{backtest_report.MARKDOWN_NAME}) | {_percent(s['vs_reactive'])} | "
            f"{_percent(s['vs_static'])} | {_percent(s['vs_seasonal_naive'])} | "
            f"{_percent(s['oracle_gap'])} |"
        )
    lines += ["", "Savings are at the SLO: each policy at its cheapest setting that meets it."]
    lines += [f"- {name}: {_headline(numbers)}" for name, numbers in summary["workloads"].items()]
    return "\n".join(lines) + "\n"


def _headline(numbers: dict[str, Any]) -> str:
    """One sentence on a workload: hybrid's savings at the SLO, or how close it came."""
    s = numbers["savings_at_slo"]
    if numbers["cost_at_slo"].get("hybrid") is not None:
        return (
            f"hybrid at the SLO saves {_percent(s['vs_reactive'])} vs reactive, "
            f"{_percent(s['vs_static'])} vs static; {_percent(s['oracle_gap'])} above the oracle"
        )
    unserved = numbers["unserved_fraction"]
    return (
        f"no setting of hybrid meets the {numbers['slo_unserved_fraction']:.1%} SLO: its best "
        f"leaves {unserved['hybrid']:.2%} of the work unserved, the reactive HPA's best "
        f"{unserved['reactive']:.2%}"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _next_steps(summary: dict[str, Any], config_path: Path) -> str:
    uri = summary["tracking_uri"]
    return "\n".join(
        [
            "Next:",
            f"  mlflow ui --backend-store-uri {uri}        # runs, metrics, plots, the champion",
            f"  prewarm serve --config {_shown(config_path)}   # replays the traces as live data",
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
def demo(out: Path, config_path: Path, tracking_uri: str | None) -> None:
    """Train, register, backtest and report on the shipped traces, then say what to try."""
    with user_errors(), progress_bar() as bar:
        task = bar.add_task("demo", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        summary = run_demo(config_path, out, tracking_uri, progress)
    show = console()
    show.print(f"[bold]{summary['training']['message']}[/bold]")
    for name, numbers in summary["workloads"].items():
        show.print(f"{name}: {_headline(numbers)}")
    show.print(f"Report: {out / 'README.md'}")
    show.print(_next_steps(summary, config_path))
