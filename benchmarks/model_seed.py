"""How much of each saving is the forecast model's seed.

The default model draws rows and features at random while it fits (LightGBM's bagging of
rows and features; on a large fleet also the sample of training rows), so a saving measured
with one seed carries that draw's luck. This benchmark runs the savings benchmark's backtest
of each trace once with the served seed, every policy swept and tuned as
``benchmarks/backtest_savings.py`` does, and again for each other seed with only hybrid (no
other policy reads the model: their rows are the same for every seed). Each seed's hybrid is
tuned against the same rows, and the report gives, under the served rule, hybrid's
validation cost per seed, its spread, its verdicts against the reactive HPA and the cheapest
peer holding the SLO, and the lowest unserved fraction it reaches; and under each rule of
``benchmarks/tuning_rules.py`` (applied to the same simulated settings), how many seeds hold
the SLO and the range of hybrid's saving over the reactive HPA. The simulator's seed (the
cold starts' draws) is the same throughout.

``--n-seeds N`` runs a model that averages N boosters per quantile (the boosting models'
``n_seeds``; each seed ``r`` then draws boosters ``r * N`` to ``r * N + N - 1``): how much
of the spread the average removes.

Run: ``.venv/bin/python benchmarks/model_seed.py [--seeds 1,2,3] [--traces a,b] [--jobs 2]
[--model lightgbm-window] [--n-seeds 4] [--features '{"lags": [0, 1]}'] [--data
../shared/data]``. Writes ``benchmarks/results/model_seed.md`` and ``.json``
(``model_seed_<model>`` for another model than the default, ``_n_seeds<N>`` for more than one
booster, ``_features`` for other features than the model's defaults (``--features``, as
``benchmarks/backtest_savings.py`` takes them), ``_subset`` when not every trace ran) unless
``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import (
    DATA,
    RESULTS,
    changed,
    features_arg,
    loaders,
    trace_inputs,
    write_results,
)
from benchmarks.progress import finished
from benchmarks.rung_spacing import peer_cell, verdict
from benchmarks.traces import chosen_traces
from benchmarks.tuning_rules import MARGINS, apply_rules, cost_cell, label, rule_header
from forecaster.backtest.run import BacktestSettings, backtest
from forecaster.backtest.tuning import TUNING_MARGIN, VALIDATION, safest
from forecaster.exceptions import ConfigError
from forecaster.features import FeatureConfig
from forecaster.models import DEFAULT_MODEL, averages_boosters, make_model
from prewarm.backtest_report import knob_text

SEEDS = (1, 2, 3)
SERVED = label(TUNING_MARGIN)


def seeds_arg(text: str) -> tuple[int, ...]:
    """``--seeds``: distinct whole numbers >= 0 other than the served seed, 0."""
    try:
        seeds = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--seeds takes whole numbers, got {text[:80]!r}"
        ) from None
    served = BacktestSettings.seed
    if not seeds or len(set(seeds)) != len(seeds) or any(s < 0 or s == served for s in seeds):
        raise argparse.ArgumentTypeError(
            f"--seeds takes distinct whole numbers >= 0 other than the served seed {served} "
            f"(always run), got {text[:80]!r}"
        )
    return seeds


def check_seeded(model: str, n_seeds: int = 1) -> None:
    """Refuse a model that draws nothing (no seed can move it), and ``n_seeds`` above 1 for
    a model that averages no boosters."""
    if "random_state" not in make_model(model).get_params():
        raise ConfigError(f"`model` {model!r} draws nothing at random: its seed cannot move it")
    if n_seeds > 1 and not averages_boosters(model):
        raise ConfigError(f"`model` {model!r} averages no boosters: it takes no `n_seeds`")


def seeded(settings: BacktestSettings, seed: int) -> BacktestSettings:
    """``settings`` with hybrid alone, on the model drawn from ``seed``."""
    return replace(
        settings,
        policies=("hybrid",),
        model_params={**settings.model_params, "random_state": seed},
    )


def seed_rows(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    step: int,
    settings: BacktestSettings,
    seeds: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """Seed -> every policy tuned under each rule of :data:`benchmarks.tuning_rules.MARGINS`
    (hybrid planning on that seed's model, the others as served) and hybrid's and the
    reactive HPA's lowest unserved fraction, each scored on validation. The served seed
    comes first."""
    served = backtest(values, times, step, settings)
    first = next(iter(served.deployed.values()))
    rows = {}
    for seed in (settings.seed, *seeds):
        ours = (
            served
            if seed == settings.seed
            else backtest(values, times, step, seeded(settings, seed))
        )
        frontier = {**served.frontier, "hybrid": ours.frontier["hybrid"]}
        rules = apply_rules(frontier, first.slo_unserved, first.validation_hours)
        lowest = {
            policy: safest(frontier[policy]).windows[VALIDATION].unserved_fraction
            for policy in ("hybrid", "reactive")
        }
        rows[str(seed)] = {"rules": rules, "lowest": lowest}
    return rows


def run(
    name: str,
    data: Path,
    model: str,
    seeds: Sequence[int],
    n_seeds: int = 1,
    features: FeatureConfig | None = None,
) -> dict[str, Any]:
    """One trace of the savings benchmark, hybrid on each seed's model (each averaging
    ``n_seeds`` boosters when above 1; with ``features`` instead of its defaults)."""
    began = time.perf_counter()
    values, times, step, settings = trace_inputs(name, data, model, features=features)
    if n_seeds > 1:
        settings = replace(settings, model_params={**settings.model_params, "n_seeds": n_seeds})
    rows = seed_rows(values, times, step, settings, seeds)
    return {"seeds": rows, "seconds": time.perf_counter() - began}


def tuned(row: Mapping[str, Any], rule: str = SERVED) -> list[dict[str, Any]]:
    """A trace's policies tuned under ``rule``, one mapping per seed, the served seed first."""
    return [s["rules"][rule] for s in row["seeds"].values()]


def spread(row: Mapping[str, Any], rule: str = SERVED) -> str:
    """Hybrid's costliest over its cheapest validation cost among the seeds that hold the
    SLO under ``rule``, minus one; how many seeds hold it."""
    runs = [d["hybrid"] for d in tuned(row, rule)]
    held = [r["cost"] for r in runs if r["meets_slo"]]
    text = f"{max(held) / min(held) - 1:.1%}" if len(held) > 1 else "-"
    return f"{text} ({len(held)} of {len(runs)} hold)"


def against_reactive(row: Mapping[str, Any], rule: str) -> str:
    """Hybrid's saving over the reactive HPA under ``rule``, its range over the seeds where
    both hold the SLO, and on how many seeds they do."""
    runs = tuned(row, rule)
    saved = [
        1 - d["hybrid"]["cost"] / d["reactive"]["cost"]
        for d in runs
        if d["hybrid"]["meets_slo"] and d["reactive"]["meets_slo"]
    ]
    if not saved:
        return f"- ({len(saved)} of {len(runs)})"
    return f"{min(saved):+.1%} to {max(saved):+.1%} ({len(saved)} of {len(runs)})"


def markdown(rows: Mapping[str, Mapping[str, Any]], model: str, seconds: float, jobs: int) -> str:
    """The report: hybrid's cost per seed and its spread, its verdicts per seed, the lowest
    unserved fraction per seed (the served rule), then the spread under each rule."""
    seeds = list(next(iter(rows.values()))["seeds"])
    head = " | ".join(f"seed {s}{' (served)' if i == 0 else ''}" for i, s in enumerate(seeds))
    bar = "---:|" * len(seeds)
    labels = [label(m) for m in MARGINS]
    lines = [
        "# Model seed: how much of each saving is the forecast model's draw",
        "",
        f"Forecast model `{model}`; the backtest of `benchmarks/backtest_savings.py` (cold start "
        "5 min, SLO 0.1 % unserved within 30 s, every policy tuned on the first half and "
        "scored on the second), once with the served seed and again with hybrid alone for "
        "each other seed of the model (`random_state`); the other policies read no model, "
        "and the simulator's seed is the same throughout. Tables are under the served rule "
        f"(`{SERVED}`: each policy's cheapest setting leaving at most half the SLO's unserved "
        "work on the tuning half) but the last, which applies each rule of "
        "`benchmarks/tuning_rules.py` to the same simulated settings. Generated by "
        f"`benchmarks/model_seed.py` in {seconds:,.0f} s with {jobs} worker(s).",
        "",
        "## Hybrid's validation cost",
        "",
        f"| trace | {head} | spread among the seeds that hold |",
        f"|---|{bar}---|",
    ]
    for name, row in rows.items():
        cells = [cost_cell(d["hybrid"]) for d in tuned(row)]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {spread(row)} |")
    lines += [
        "",
        "## Against the reactive HPA and the cheapest peer holding the SLO",
        "",
        "`1 - hybrid / other` on validation where both hold the SLO, per seed.",
        "",
        f"| trace | vs reactive: {head} | vs best peer: {head} |",
        f"|---|{bar}{bar}",
    ]
    for name, row in rows.items():
        runs = tuned(row)
        cells = [verdict(d, "reactive") for d in runs] + [peer_cell(d) for d in runs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Lowest unserved fraction reached, out of sample",
        "",
        "Hybrid's setting with the least unserved work on the tuning half, scored on "
        "validation, per seed; the reactive HPA's beside it.",
        "",
        f"| trace | {head} | reactive |",
        f"|---|{bar}---:|",
    ]
    for name, row in rows.items():
        runs = list(row["seeds"].values())
        cells = [f"{s['lowest']['hybrid']:.3%}" for s in runs]
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {runs[0]['lowest']['reactive']:.3%} |"
        )
    lines += [
        "",
        "## Under each tuning rule",
        "",
        "Hybrid's cost spread among the seeds that hold the SLO (how many do), and its saving "
        "over the reactive HPA, lowest to highest over the seeds where both hold it (on how "
        "many).",
        "",
        *rule_header(("spread", "vs reactive"), labels, align="---"),
    ]
    for name, row in rows.items():
        cells = [spread(row, x) for x in labels] + [against_reactive(row, x) for x in labels]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Hybrid's tuned setting per seed", ""]
    for name, row in rows.items():
        parts = [
            f"seed {s}: {knob_text(d['hybrid']['params'])}"
            for s, d in zip(row["seeds"], tuned(row), strict=True)
        ]
        lines.append(f"- **{name}**: " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=seeds_arg, default=SEEDS, help="Comma-separated.")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--n-seeds",
        type=n_seeds_arg,
        default=1,
        help="Boosters each seed's model averages (the model's `n_seeds`); 1: one.",
    )
    parser.add_argument(
        "--features",
        type=features_arg,
        help="FeatureConfig fields for the model, as JSON (e.g. '{\"lags\": [0, 1, 2]}').",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="Directory of the traces.")
    parser.add_argument("--traces", help="Comma-separated subset (default: all).")
    parser.add_argument("--jobs", type=int, default=1, help="Traces run in parallel.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where results are written.")
    args = parser.parse_args()
    try:
        check_seeded(args.model, args.n_seeds)
    except ConfigError as exc:
        parser.error(f"--model: {exc}")
    known = list(loaders(args.data))
    names = chosen_traces(parser, known, args.traces)
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            n: pool.submit(run, n, args.data, args.model, args.seeds, args.n_seeds, args.features)
            for n in names
        }
        rows = finished(futures, lambda n, row: f"{n}, {row['seconds']:.0f} s")
    seconds = time.perf_counter() - began
    document = {
        "model": args.model,
        "n_seeds": args.n_seeds,
        "features": None if args.features is None else args.features.to_dict(),
        "seeds": list(args.seeds),
        "seconds": seconds,
        "traces": rows,
    }
    whole, custom = set(names) == set(known), args.features is not None
    write_results(
        args.out / stem(args.model, whole, args.n_seeds, custom),
        document,
        markdown(
            rows,
            model_text(args.model, args.n_seeds, args.features),
            seconds,
            args.jobs,
        ),
    )


def n_seeds_arg(text: str) -> int:
    """``--n-seeds``: a whole number >= 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--n-seeds takes a whole number >= 1, got {text[:80]!r}")
    return n


def model_text(model: str, n_seeds: int, features: FeatureConfig | None = None) -> str:
    """The report's name of the model, which it sets in backticks: the registered name, the
    boosters it averages and the features changed from its defaults.

    >>> model_text("lightgbm", 1), model_text("lightgbm", 4)
    ('lightgbm', 'lightgbm` with `n_seeds=4')
    >>> model_text("lightgbm", 1, FeatureConfig(lags=(0, 1)))
    'lightgbm` with features `{"lags": [0, 1]}'
    """
    text = model if n_seeds == 1 else f"{model}` with `n_seeds={n_seeds}"
    return text if features is None else f"{text}` with features `{json.dumps(changed(features))}"


def stem(model: str, whole: bool, n_seeds: int = 1, features: bool = False) -> str:
    """The results' file name: the model where it is not the default, the boosters it
    averages where more than one, ``_features`` where they are not the model's defaults,
    ``_subset`` where not every trace ran.

    >>> stem(DEFAULT_MODEL, True), stem("lightgbm", False), stem(DEFAULT_MODEL, False, 4)
    ('model_seed', 'model_seed_lightgbm_subset', 'model_seed_n_seeds4_subset')
    >>> stem(DEFAULT_MODEL, False, features=True)
    'model_seed_features_subset'
    """
    return (
        "model_seed"
        + ("" if model == DEFAULT_MODEL else f"_{model}")
        + ("" if n_seeds == 1 else f"_n_seeds{n_seeds}")
        + ("_features" if features else "")
        + ("" if whole else "_subset")
    )


if __name__ == "__main__":
    main()
