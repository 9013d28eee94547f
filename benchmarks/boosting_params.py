"""Whether other boosting parameters would lower the default model's q0.9 pinball loss.

The default model's boosting parameters (``n_estimators``, ``learning_rate``, ``num_leaves``,
``min_child_samples``) were never measured against others. This benchmark scores the default
model with each variant of :data:`VARIANTS` on the five public traces, walk-forward as
``benchmarks/forecast_accuracy.py`` does (same horizon, window, refits and quantiles), but on
the week *before* the one that benchmark scores: the data is cut ``--before-days`` (7) days
before its end. A setting chosen here and then reported on ``forecast_accuracy``'s week
would be chosen out of sample; chosen on that week itself, its lead would be in sample.

Each cell is the variant's loss over the default's on that trace (below 1: lower), with its
coverage; the last column is the geometric mean over the traces.

Run: ``.venv/bin/python benchmarks/boosting_params.py [--variants default,trees400]
[--traces a,b] [--data ../shared/data]``. Writes ``benchmarks/results/boosting_params.md``
and ``.json`` (``_subset`` when not every trace or variant ran) unless ``--out`` says
otherwise. About 30 minutes on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import DATA, RESULTS, write_results
from benchmarks.forecast_accuracy import (
    EVAL_DAYS,
    TRACES,
    Dataset,
    evaluate_dataset,
    load_datasets,
    with_params,
)
from benchmarks.progress import announce
from benchmarks.traces import chosen_traces
from forecaster.models import DEFAULT_MODEL

# Each variant changes one parameter of the default's (200 trees, learning rate 0.05, 31
# leaves, 40 rows per leaf), each way, and the last two the pair that moved most.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "trees400": {"n_estimators": 400},
    "lr0.1": {"learning_rate": 0.1},
    "leaves15": {"num_leaves": 15},
    "leaves63": {"num_leaves": 63},
    "child100": {"min_child_samples": 100},
    "child200": {"min_child_samples": 200},
    "trees400-child100": {"n_estimators": 400, "min_child_samples": 100},
}
BEFORE_DAYS = 7.0
LEVEL = "0.9"


def cut(dataset: Dataset, days: float) -> Dataset:
    """``dataset`` without its last ``days`` days."""
    frame = dataset.frame
    end = frame["timestamp"].max() - pd.Timedelta(days=days)
    kept = frame[frame["timestamp"] <= end].reset_index(drop=True)
    return Dataset(dataset.name, dataset.kind, kept, dataset.step, dataset.source)


def scores(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the report keeps of one model's entry of :func:`evaluate_dataset`."""
    if "error" in entry:
        return {"error": entry["error"]}
    return {
        "pinball": entry["pinball"][LEVEL],
        "coverage": entry["coverage"][LEVEL],
        "window_pinball": entry["window_pinball"][LEVEL],
        "window_coverage": entry["window_coverage"][LEVEL],
        "fit_seconds": entry["fit_seconds"],
    }


def ratios(results: Mapping[str, Mapping[str, Any]], variant: str, key: str) -> list[float]:
    """``variant``'s ``key`` over the default's, per trace (traces where either failed left
    out)."""
    return [
        trace[variant][key] / trace["default"][key]
        for trace in results.values()
        if "error" not in trace.get(variant, {"error": ""})
        and "error" not in trace.get("default", {"error": ""})
    ]


def geometric_mean(values: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def table(results: Mapping[str, Mapping[str, Any]], key: str, cover: str) -> list[str]:
    """One Markdown table: a row per variant, a cell per trace."""
    traces = list(results)
    lines = [
        "| variant | " + " | ".join(traces) + " | geometric mean |",
        "|---|" + "---:|" * (len(traces) + 1),
    ]
    variants = list(next(iter(results.values()))) if results else []
    for variant in variants:
        cells = []
        for trace in traces:
            entry = results[trace].get(variant, {})
            base = results[trace].get("default", {})
            if "error" in entry or "error" in base or not entry:
                cells.append(f"failed: {entry.get('error', base.get('error', 'not run'))}")
                continue
            cells.append(f"{entry[key] / base[key]:.3f} ({entry[cover]:.3f})")
        mean = geometric_mean(ratios(results, variant, key))
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {mean:.3f} |")
    return lines


def markdown(results: Mapping[str, Mapping[str, Any]], before: float, seconds: float) -> str:
    params = {name: VARIANTS[name] for name in next(iter(results.values()), {})}
    return "\n".join(
        [
            "# Boosting parameters of the default model",
            "",
            f"Generated by `benchmarks/boosting_params.py` on {datetime.now(UTC):%Y-%m-%d}, in "
            f"{seconds / 60:.1f} minutes. `{DEFAULT_MODEL}` walk-forward as "
            f"`benchmarks/forecast_accuracy.py` scores it ({EVAL_DAYS:g} days of origins, "
            f"refit every day), on the data up to {before:g} days before each trace's end"
            + (
                ": the week before the one `forecast_accuracy` reports"
                if before == EVAL_DAYS
                else ""
            )
            + ". Each cell is the variant's "
            "q0.9 pinball loss over the default's on that trace, its coverage in brackets.",
            "",
            "Variants (parameters besides the default's): "
            + "; ".join(f"`{n}` {json.dumps(p)}" for n, p in params.items()),
            "",
            "## Per horizon",
            "",
            *table(results, "pinball", "coverage"),
            "",
            "## On the window's maximum (what the plan sizes for)",
            "",
            *table(results, "window_pinball", "window_coverage"),
            "",
        ]
    )


def variants_arg(text: str) -> list[str]:
    """``--variants``: names of :data:`VARIANTS`; the default is always run (the yardstick)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"--variants: unknown {unknown}; known: {', '.join(VARIANTS)}"
        )
    return ["default", *(n for n in names if n != "default")]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", type=variants_arg, help="Comma-separated (default: all).")
    parser.add_argument("--data", type=Path, default=DATA, help="Directory of the traces.")
    parser.add_argument("--traces", help="Comma-separated subset (default: the five public).")
    parser.add_argument(
        "--before-days",
        type=float,
        default=BEFORE_DAYS,
        help="Days cut off each trace's end before scoring [default: 7].",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where results are written.")
    args = parser.parse_args(argv)
    names = [t.name for t in TRACES]
    traces = chosen_traces(parser, names, args.traces) if args.traces else names
    variants = args.variants or list(VARIANTS)
    started = time.perf_counter()
    datasets = load_datasets(args.data, quick=False, scenarios=False, traces=traces)
    results: dict[str, dict[str, Any]] = {}
    for dataset in datasets:
        contenders = {v: ("prewarm", with_params(DEFAULT_MODEL, **VARIANTS[v])) for v in variants}
        with threadpool_limits(1):  # as forecast_accuracy runs: one core per model
            report = evaluate_dataset(cut(dataset, args.before_days), contenders, EVAL_DAYS)
        results[dataset.name] = {v: scores(e) for v, e in report["models"].items()}
        announce(f"{dataset.name}: {len(variants)} variants done", started)
    seconds = time.perf_counter() - started
    subset = len(traces) < len(names) or len(variants) < len(VARIANTS)
    stem = "boosting_params" + ("_subset" if subset else "")
    write_results(
        args.out / stem,
        {"before_days": args.before_days, "seconds": seconds, "traces": results},
        markdown(results, args.before_days, seconds),
    )


if __name__ == "__main__":
    main()
