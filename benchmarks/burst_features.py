"""Does recent burst activity help the forecast or the warm buffer? Measured on every trace.

Run::

    .venv/bin/python benchmarks/burst_features.py [--data-dir ../shared/data]
        [--out benchmarks/results] [--models lightgbm] [--burst-window 1d] [--quick]

**Forecast.** Each model of ``--models`` runs twice on the folds of
``benchmarks/forecast_accuracy.py`` (walk-forward over the last 7 days, refit daily, scored
10 minutes ahead and over the 10-minute window past it): with its default features and with
the burst features added (:attr:`forecaster.features.FeatureConfig.burst_window`: the share of
burst cells in the trailing window, their mean excess, the time since the last). The report
gives each pair's pinball loss at q0.9, per horizon and over the window, as a ratio.

**Buffer.** The warm buffer is a quantile of the relative increase over the lead window
(:mod:`forecaster.buffer`). Learned on all data before the last 7 days and scored on them, at
q0.99, three ways: one quantile for all origins; one per hour of the day (what prewarm serves);
one per burst regime: the share of burst cells in the trailing ``--burst-window`` above its
median over the training origins (busier than usual), or not. Each is scored by its pinball
loss on the held-out increases, its coverage and its mean size (what the buffer costs). The
burst settings are the feature defaults (3 deviations over the 2 hours before), the same on
every trace.

Writes ``burst_features.md`` and ``burst_features.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.forecast_accuracy import (
    ATTRIBUTION,
    DEFAULT_DATA,
    DEFAULT_OUT,
    EVAL_DAYS,
    QUICK_EVAL_DAYS,
    Dataset,
    evaluate_dataset,
    load_datasets,
    with_features,
)
from forecaster.buffer import hour_of_day, min_per_hour, relative_increase, training_level
from forecaster.calibration import ConformalCalibrator, coverage
from forecaster.features import FeatureConfig, burst_features
from forecaster.metrics import pinball_loss
from forecaster.models import MODELS, make_model
from forecaster.windows import WindowStats
from prewarm.evaluate import window_cells

BUFFER_QUANTILE = 0.99
BUFFER_WAYS = ("pooled", "per hour", "per regime")
LEVEL = "0.9"


def burst_config(window: str) -> FeatureConfig:
    """The default features with the burst features over ``window``."""
    return FeatureConfig(burst_window=window)


def forecast_rows(
    dataset: Dataset, models: Sequence[str], window: str, eval_days: float
) -> dict[str, dict[str, Any]]:
    """Each model with and without the burst features, on the benchmark's folds."""
    bursts = burst_config(window)
    contenders: dict[str, tuple[str, Any]] = {}
    for name in models:
        contenders[name] = ("prewarm", make_model)
        contenders[f"{name}+bursts"] = ("prewarm", with_features(name, bursts))
    report = evaluate_dataset(dataset, contenders, eval_days)
    return dict(report["models"])


def buffer_rows(dataset: Dataset, window: str, eval_days: float) -> dict[str, dict[str, float]]:
    """The three buffers of the increase ratio, learned before the last ``eval_days`` and
    scored on them: pinball at :data:`BUFFER_QUANTILE`, coverage and mean size."""
    values = dataset.frame.sort_values("timestamp")["value"].to_numpy(dtype=float)
    first, last = window_cells(dataset.horizon_seconds, dataset.hold_seconds, dataset.step)
    seconds = eval_days * 86400 if dataset.eval_seconds is None else dataset.eval_seconds
    cut = len(values) - round(seconds / dataset.step)
    level = training_level(values[:cut])
    ratio = relative_increase(values, first, last, level)
    cells = np.arange(len(values))
    start = dataset.frame["timestamp"].min()
    offset = float((start - start.normalize()).total_seconds())
    hours = hour_of_day(cells, dataset.step, offset)
    config = burst_config(window)
    share, _, _ = burst_features(
        WindowStats(values), np.array([len(values)]), cells, config, dataset.step
    )
    train = np.isfinite(ratio) & (cells < cut - last)  # increases seen whole before the cut
    test = np.isfinite(ratio) & (cells >= cut)
    regime = (share > np.nanmedian(share[train])).astype(int)
    groups = {"pooled": np.zeros(len(values), int), "per hour": hours, "per regime": regime}
    out = {}
    for way in BUFFER_WAYS:
        calibrator = ConformalCalibrator(
            (BUFFER_QUANTILE,), min_samples=min_per_hour(BUFFER_QUANTILE)
        )
        zero = np.zeros((int(train.sum()), 1))
        calibrator.fit(ratio[train], zero, groups[way][train])
        buffer = calibrator.transform(np.zeros((int(test.sum()), 1)), groups[way][test])[:, 0]
        buffer = np.maximum(buffer, 0.0)
        out[way] = {
            "pinball": pinball_loss(ratio[test], buffer, BUFFER_QUANTILE),
            "coverage": coverage(ratio[test], buffer),
            "mean_buffer": float(buffer.mean()),
            "regime_share": float(regime[test].mean()),
        }
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b and np.isfinite(a) and np.isfinite(b) else "-"


def render_markdown(report: dict[str, Any]) -> str:
    """The two tables, the verdict per trace and the settings."""
    s = report["settings"]
    lines = [
        "# Burst-activity features: forecast and warm buffer",
        "",
        f"Generated by `benchmarks/burst_features.py` on {report['generated'][:10]} in "
        f"{report['elapsed_seconds'] / 60:.1f} minutes{' (quick run)' if s['quick'] else ''}. "
        f"Burst window {s['burst_window']}, a burst {s['burst_sigma']:g} deviations over the "
        f"{s['burst_reference']} before it; folds of `forecast_accuracy.py` (the last "
        f"{s['eval_days']:g} days, refit daily).",
        "",
        "## Forecast: pinball loss at q0.9, with the burst features over without",
        "",
        "| trace | model | pinball | with bursts | ratio | window pinball | with bursts | ratio "
        "| window cov | with bursts |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for trace, entry in report["datasets"].items():
        for name in s["models"]:
            plain, bursty = (
                entry["forecast"].get(name, {}),
                entry["forecast"].get(f"{name}+bursts", {}),
            )
            if "error" in plain or "error" in bursty or not plain or not bursty:
                lines.append(
                    f"| {trace} | {name} | failed: {plain.get('error') or bursty.get('error')} |"
                )
                continue
            p, b = plain["pinball"][LEVEL], bursty["pinball"][LEVEL]
            wp, wb = plain["window_pinball"][LEVEL], bursty["window_pinball"][LEVEL]
            lines.append(
                f"| {trace} | {name} | {p:.4g} | {b:.4g} | {_ratio(b, p)} | {wp:.4g} | {wb:.4g} "
                f"| {_ratio(wb, wp)} | {plain['window_coverage'][LEVEL]:.3f} "
                f"| {bursty['window_coverage'][LEVEL]:.3f} |"
            )
    lines += [
        "",
        f"## Buffer: the q{BUFFER_QUANTILE:g} of the relative increase over the lead window",
        "",
        "Learned before the scored days, scored on them. Pinball loss (lower is better), "
        f"coverage (target {BUFFER_QUANTILE:g}) and mean buffer (a share of the demand: its cost)."
        " `regime share`: scored origins busier with bursts than the training origins' median.",
        "",
        "| trace | regime share | "
        + " | ".join(f"{w} pinball, cov, mean" for w in BUFFER_WAYS)
        + " |",
        "|---|---:|" + "---|" * len(BUFFER_WAYS),
    ]
    for trace, entry in report["datasets"].items():
        buffers = entry["buffer"]
        cells = [
            f"{b['pinball']:.4g}, {b['coverage']:.3f}, {b['mean_buffer']:.3g}"
            for b in (buffers[w] for w in BUFFER_WAYS)
        ]
        share = buffers[BUFFER_WAYS[0]]["regime_share"]
        lines.append(f"| {trace} | {share:.2f} | " + " | ".join(cells) + " |")
    lines += ["", ATTRIBUTION, ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="traces directory")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results go")
    parser.add_argument("--models", default="lightgbm", help="prewarm models, comma-separated")
    parser.add_argument("--burst-window", default="1d", help="trailing window of the features")
    parser.add_argument("--quick", action="store_true", help="one day of origins, two traces")
    args = parser.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; registered: {', '.join(MODELS)}")
    burst_config(args.burst_window)  # a bad duration is refused before any work
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run both measurements on every dataset; write the report. Exit 0."""
    from threadpoolctl import threadpool_limits

    args = parse_args(argv)
    eval_days = QUICK_EVAL_DAYS if args.quick else EVAL_DAYS
    started = time.perf_counter()
    datasets = load_datasets(args.data_dir, quick=args.quick, scenarios=not args.quick)
    config = burst_config(args.burst_window)
    report: dict[str, Any] = {
        "generated": datetime.now(UTC).isoformat(),
        "settings": {
            "models": args.models,
            "burst_window": config.burst_window,
            "burst_sigma": config.burst_sigma,
            "burst_reference": config.burst_reference,
            "eval_days": eval_days,
            "quick": args.quick,
            "buffer_quantile": BUFFER_QUANTILE,
        },
        "datasets": {},
    }
    with threadpool_limits(limits=1):
        for done, dataset in enumerate(datasets, start=1):
            print(f"[{done}/{len(datasets)}] {dataset.name}", flush=True)
            report["datasets"][dataset.name] = {
                "forecast": forecast_rows(dataset, args.models, args.burst_window, eval_days),
                "buffer": buffer_rows(dataset, args.burst_window, eval_days),
            }
    report["elapsed_seconds"] = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "burst_features" + ("_quick" if args.quick else "")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    markdown = render_markdown(report)
    (args.out / f"{stem}.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
