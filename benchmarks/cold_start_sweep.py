"""Where prediction stops paying: the savings backtest over a range of cold starts.

For each public trace (:data:`benchmarks.traces.TRACES`) and each cold start, the backtest of
``benchmarks/backtest_savings.py`` (same workload, walk-forward, SLO and settings budget per
policy; only the cold start changes): every policy tuned on the first half of the scored span
and scored on the second. Per cold start it reports each policy's validation cost at the SLO,
the lowest unserved fraction each reaches out of sample, and the saving of the best
predictive policy, and of hybrid, over the tuned reactive HPA. A short cold start lets the
reactive HPA catch up with demand by itself; past some cold start, only a forecast meets the
SLO, or meets it for less. The plot draws that line per trace.

The walk-forward forecasts depend on the lead window's horizons, not on the rest of the
workload: each distinct lead window of a trace is forecast once and its forecasts are reused
by every cold start with the same horizons (:func:`forecaster.backtest.run.lead_forecast`), so
each backtest is exactly the one ``backtest`` would compute alone.

Run: ``.venv/bin/python benchmarks/cold_start_sweep.py [DATA_DIR] --cold-starts
5s,30s,1m,2m,5m,10m [--policies ...] [--traces a,b] [--jobs 2]``. Writes
``benchmarks/results/cold_start_sweep.md`` and ``.json`` and ``docs/cold-start-sweep.png``
(``--out`` and ``--plot`` say otherwise; a ``--traces`` subset writes ``*_subset`` files).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if __name__ == "__main__" and not __package__:
    # Run as a script: make the repository root importable for `benchmarks.*`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import (
    DATA,
    RESULTS,
    add_tuning_margin,
    backtest_settings,
    loaders,
    workload,
)
from benchmarks.progress import finished
from benchmarks.traces import TRACES, chosen_traces
from forecaster.backtest.plots import legend_below
from forecaster.backtest.run import BacktestSettings, backtest, lead_forecast, lead_horizons
from forecaster.backtest.tuning import rule_text
from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError
from forecaster.frame import infer_step
from forecaster.models import DEFAULT_MODEL
from forecaster.policies import FORECAST_POLICIES, PEER_POLICIES, QuantileForecast, policy_class
from prewarm.payoff import (
    NONE_MEETS,
    PAYS,
    cold_start_row,
    verdicts,
    where_it_stops,
)
from prewarm.spans import duration_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOT = Path(__file__).resolve().parents[1] / "docs" / "cold-start-sweep.png"
COLD_STARTS = "5s,30s,1m,2m,5m,10m"
POLICIES = ("static", "reactive", "predictive", "buffered", "hybrid", "oracle", *PEER_POLICIES)


def _load(name: str, data: Path) -> tuple[pd.DataFrame, int]:
    frame = loaders(data)[name]()
    return frame, infer_step(frame)


def _settings(frame: pd.DataFrame, cold_start: int, args: argparse.Namespace) -> BacktestSettings:
    values = frame["value"].to_numpy(dtype=float)
    return backtest_settings(
        workload(values, cold_start), args.policies, args.model, args.tuning_margin
    )


def forecast_task(
    name: str, cold_start: int, args: argparse.Namespace
) -> tuple[QuantileForecast, float]:
    """The walk-forward forecasts of the lead window of ``cold_start`` on trace ``name``."""
    began = time.perf_counter()
    frame, step = _load(name, args.data)
    values = frame["value"].to_numpy(dtype=float)
    settings = _settings(frame, cold_start, args)
    forecast = lead_forecast(values, pd.DatetimeIndex(frame["timestamp"]), step, settings)
    return forecast, time.perf_counter() - began


def backtest_task(
    name: str, cold_start: int, args: argparse.Namespace, forecast: QuantileForecast | None
) -> dict[str, Any]:
    """One trace at one cold start: each policy deployed, its lowest unserved, the verdict."""
    began = time.perf_counter()
    frame, step = _load(name, args.data)
    values = frame["value"].to_numpy(dtype=float)
    settings = _settings(frame, cold_start, args)
    times = pd.DatetimeIndex(frame["timestamp"])
    result = backtest(values, times, step, settings, forecast=forecast)
    return {
        "cold_start": cold_start,
        **cold_start_row(result),
        "seconds": time.perf_counter() - began,
    }


def sweep(names: Sequence[str], args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Every trace at every cold start; forecasts once per trace and lead window."""
    windows: dict[str, dict[int, tuple[int, int]]] = {}
    for name in names:
        frame, step = _load(name, args.data)
        windows[name] = {
            c: lead_horizons(_settings(frame, c, args), step) for c in args.cold_starts
        }
    needs_forecast = bool(FORECAST_POLICIES & set(args.policies))
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        forecasts: dict[tuple[str, tuple[int, int]], Future[tuple[QuantileForecast, float]]] = {}
        for name, by_start in windows.items():
            for cold_start, window in by_start.items():
                if needs_forecast and (name, window) not in forecasts:
                    forecasts[name, window] = pool.submit(forecast_task, name, cold_start, args)
        runs: dict[tuple[str, int], Future[dict[str, Any]]] = {}
        for name, by_start in windows.items():
            for cold_start, window in by_start.items():
                shared = forecasts[name, window].result()[0] if needs_forecast else None
                runs[name, cold_start] = pool.submit(backtest_task, name, cold_start, args, shared)
        done = finished(runs, lambda key, _: f"{key[0]}, cold start {key[1]} s")
        return {
            name: {
                "lead_windows": len(set(by_start.values())),
                "forecast_seconds": sum(
                    f.result()[1] for (n, _), f in forecasts.items() if n == name
                ),
                "cold_starts": {str(c): done[name, c] for c in args.cold_starts},
            }
            for name, by_start in windows.items()
        }


def _cost(row: Mapping[str, Any]) -> str:
    return f"{row['cost']:,.0f}" if row["meets_slo"] else "-"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def summary_table(rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per trace and cold start: reactive, hybrid, the best predictive policy, the savings."""
    lines = [
        "| trace | cold start | reactive | hybrid | best predictive | saving | hybrid saving "
        "| verdict |",
        "|---|---|---:|---:|---|---:|---:|---|",
    ]
    for name, trace in rows.items():
        for cold_start, row in trace["cold_starts"].items():
            deployed, best = row["deployed"], row["best_predictive"]
            best_text = "-" if best is None else f"{best} {_cost(deployed[best])}"
            cells = [
                name,
                duration_text(int(cold_start)),
                _cost(deployed["reactive"]) if "reactive" in deployed else "-",
                _cost(deployed["hybrid"]) if "hybrid" in deployed else "-",
                best_text,
                _percent(row["saving"]),
                _percent(row["hybrid_saving"]),
                row["verdict"],
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def saving_cell(row: Mapping[str, Any], policy: str | None) -> str:
    """``policy``'s saving over the tuned reactive HPA at one cold start, or which side
    meets the SLO there (``policy`` is ``None`` where no predictive policy meets it)."""
    deployed = row["deployed"]
    reactive = row["reactive_meets_slo"]
    meets = policy is not None and policy in deployed and deployed[policy]["meets_slo"]
    if meets and reactive:
        return _percent(1.0 - deployed[policy]["cost"] / deployed["reactive"]["cost"])
    if meets:
        return "reactive misses"
    return "only reactive" if reactive else "neither"


def saving_table(rows: Mapping[str, Mapping[str, Any]], best: bool) -> list[str]:
    """Traces by cold starts: the saving of the best predictive policy (``best``, its name
    beside it) or of hybrid over the tuned reactive HPA."""
    starts = list(next(iter(rows.values()))["cold_starts"])
    lines = [
        "| trace | " + " | ".join(duration_text(int(c)) for c in starts) + " |",
        "|---|" + "---:|" * len(starts),
    ]
    for name, trace in rows.items():
        cells = []
        for row in (trace["cold_starts"][c] for c in starts):
            policy = row["best_predictive"] if best else "hybrid"
            cell = saving_cell(row, policy)
            cells.append(f"{cell} ({policy})" if best and cell[0] in "+-" else cell)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _policy_table(
    rows: Mapping[str, Mapping[str, Any]], policies: Sequence[str], cell: Any
) -> list[str]:
    lines = [
        "| trace | cold start | " + " | ".join(policies) + " |",
        "|---|---|" + "---:|" * len(policies),
    ]
    for name, trace in rows.items():
        for cold_start, row in trace["cold_starts"].items():
            cells = [cell(row, p) if p in row["deployed"] else "skipped" for p in policies]
            lines.append(
                f"| {name} | {duration_text(int(cold_start))} | " + " | ".join(cells) + " |"
            )
    return lines


def markdown(rows: Mapping[str, Mapping[str, Any]], args: argparse.Namespace, wall: float) -> str:
    """The results as a Markdown report."""
    policies = list(args.policies)
    lines = [
        "# Cold-start sweep: where prediction stops paying",
        "",
        f"Forecast model `{args.model}`; cold starts "
        + ", ".join(duration_text(c) for c in args.cold_starts)
        + "; everything else as `benchmarks/backtest_savings.py`: capacity per replica = p99",
        "of demand / 20, SLO at most 0.1 % of the work unserved within 30 s, 14-day training",
        "window retrained weekly, every policy tuned with its own sweep grid (the settings",
        "budget of the savings benchmark) on the first half of the scored span (its cheapest",
        f"setting that {rule_text(args.tuning_margin)} there) and scored on the second.",
        "Generated by `benchmarks/cold_start_sweep.py`.",
        "",
        f"Wall time {wall:.0f} s with {args.jobs} worker(s); per trace, forecasts (s, lead "
        "windows) and backtests (s): "
        + "; ".join(
            f"{name} {t['forecast_seconds']:.0f} ({t['lead_windows']}), "
            f"{sum(r['seconds'] for r in t['cold_starts'].values()):.0f}"
            for name, t in rows.items()
        )
        + ".",
        "",
        "## Where prediction pays",
        "",
        "Validation cost at the SLO (`-` where the tuned setting misses it on validation). The",
        "best predictive policy is the cheapest policy other than static, reactive and the",
        "oracle that meets the SLO on validation (picked on validation: an upper bound on what",
        "choosing among them would give); hybrid's is the saving of the configuration prewarm",
        "serves. `saving = 1 - cost / reactive's cost` where both meet the SLO. Prediction",
        "*pays* where it is cheaper than the tuned reactive HPA or where only it meets the SLO.",
        "",
        "Saving of the best predictive policy over the tuned reactive HPA (`reactive misses`:",
        "only prediction meets the SLO; `only reactive`: no predictive policy meets it;",
        "`neither`: neither side does, a static fleet may):",
        "",
        *saving_table(rows, best=True),
        "",
        "Saving of hybrid, the configuration prewarm serves:",
        "",
        *saving_table(rows, best=False),
        "",
    ]
    for name, trace in rows.items():
        lines.append(f"- **{name}**: {where_it_stops(verdicts(trace['cold_starts']))}.")
    lines += [
        "",
        "Each trace and cold start:",
        "",
        *summary_table(rows),
        "",
        "## Cost at the SLO per policy, out of sample",
        "",
        *_policy_table(rows, policies, lambda row, p: _cost(row["deployed"][p])),
        "",
        "## Lowest unserved fraction per policy, out of sample",
        "",
        "Each policy's setting with the least unserved work on the tuning window, scored on",
        "the validation window.",
        "",
        *_policy_table(rows, policies, lambda row, p: f"{row['lowest_unserved'][p]:.3%}"),
        "",
        "## Settings tried per policy",
        "",
    ]
    first = next(iter(next(iter(rows.values()))["cold_starts"].values()))
    lines.append(
        ", ".join(f"{p} {d['settings_tried']}" for p, d in first["deployed"].items()) + "."
    )
    skipped = [
        f"- {name} at {duration_text(int(c))}: {p}: {why}"
        for name, t in rows.items()
        for c, row in t["cold_starts"].items()
        for p, why in row["skipped"].items()
    ]
    if skipped:
        lines += ["", "Skipped:", "", *skipped]
    return "\n".join(lines) + "\n"


def figure(rows: Mapping[str, Mapping[str, Any]]) -> Figure:
    """One panel per trace: the saving over the tuned reactive HPA against the cold start.

    A triangle at the top marks a cold start where only prediction meets the SLO (the
    reactive HPA misses it), one at the bottom where only the reactive HPA meets it, a cross
    on zero one where neither the reactive HPA nor any predictive policy meets it.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3.2 * len(rows), 3.6), layout="constrained")
    axes = fig.subplots(1, len(rows), sharey=True, squeeze=False)[0]
    for ax, (name, trace) in zip(axes, rows.items(), strict=True):
        points = [(int(c), row) for c, row in trace["cold_starts"].items()]
        starts = [c for c, _ in points]
        for key, label, style in (
            ("saving", "best predictive", "o-"),
            ("hybrid_saving", "hybrid", "s--"),
        ):
            values = [float("nan") if r[key] is None else 100 * r[key] for _, r in points]
            ax.plot(starts, values, style, label=label, markersize=4)
        only = [c for c, r in points if not r["reactive_meets_slo"] and r["verdict"] == PAYS]
        none = [c for c, r in points if r["verdict"] == NONE_MEETS]
        reactive_only = [c for c, r in points if r["reactive_meets_slo"] and r["saving"] is None]
        # at the top of the panel: the saving there is undefined, prediction wins outright
        ax.scatter(
            only,
            [0.97] * len(only),
            marker="^",
            color="tab:green",
            transform=ax.get_xaxis_transform(),
            label="only prediction meets the SLO",
        )
        ax.scatter(none, [0.0] * len(none), marker="x", color="tab:red",
                   label=NONE_MEETS)  # fmt: skip
        ax.scatter(reactive_only, [0.03] * len(reactive_only), marker="v", color="tab:purple",
                   transform=ax.get_xaxis_transform(),
                   label="only reactive meets the SLO")  # fmt: skip
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlim(min(starts) / 1.5, max(starts) * 1.5)
        ax.set_xticks(starts, [duration_text(c) for c in starts], fontsize=7)
        ax.minorticks_off()
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("cold start")
    axes[0].set_ylabel("saving over tuned reactive HPA (%)")
    legend_below(fig, axes)
    return fig


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    try:
        args.cold_starts = sorted(
            {parse_duration(t, name="--cold-starts") for t in args.cold_starts.split(",") if t}
        )
        args.policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
        for policy in args.policies:
            policy_class(policy)
    except ConfigError as exc:
        parser.error(str(exc))
    if not args.cold_starts or not args.policies:
        parser.error("--cold-starts and --policies must name at least one each")
    if "reactive" not in args.policies:
        parser.error("--policies must include reactive: the savings are against it")
    args.names = chosen_traces(parser, [t.name for t in TRACES], args.traces)
    return args


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA, help="Directory of traces.")
    parser.add_argument("--cold-starts", default=COLD_STARTS, help="Comma-separated durations.")
    parser.add_argument("--policies", default=",".join(POLICIES), help="Comma-separated.")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--traces", help="Comma-separated subset of the public traces.")
    parser.add_argument("--jobs", type=int, default=1, help="Backtests run in parallel.")
    add_tuning_margin(parser)
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where results are written.")
    parser.add_argument("--plot", type=Path, default=PLOT, help="Where the figure is written.")
    args = _parse(parser, argv)
    began = time.perf_counter()
    rows = sweep(args.names, args)
    write(rows, args, time.perf_counter() - began)


def write(rows: dict[str, dict[str, Any]], args: argparse.Namespace, wall: float) -> None:
    """The Markdown report, the JSON and the figure of a sweep, and its table on stdout."""
    stem = "cold_start_sweep" if not args.traces else "cold_start_sweep_subset"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.md").write_text(markdown(rows, args, wall))
    document = {
        "model": args.model,
        "tuning_margin": args.tuning_margin,
        "policies": list(args.policies),
        "cold_starts": args.cold_starts,
        "wall_seconds": wall,
        "jobs": args.jobs,
        "traces": rows,
    }
    (args.out / f"{stem}.json").write_text(json.dumps(document, indent=2, default=float))
    plot = args.plot if not args.traces else args.plot.with_stem(args.plot.stem + "-subset")
    plot.parent.mkdir(parents=True, exist_ok=True)
    figure(rows).savefig(plot, dpi=110)
    print("\n".join(summary_table(rows)))
    print(f"wrote {args.out / stem}.md and .json, {plot}; {wall:.0f} s")


if __name__ == "__main__":
    main()
