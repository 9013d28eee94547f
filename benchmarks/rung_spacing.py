"""How much the tuned rows on bursty traffic depend on the spacing of the rungs of reach.

Every open-ended grid ends in the same rungs (:mod:`forecaster.policies.reach`: the path
that carries the margin sized at utilization 0.25, 0.2, 0.15 and 0.1). Tuning takes each
policy's cheapest setting that holds the rule on the tuning half; where that is a rung, a
ladder with more rungs offers cheaper settings closer to the edge, which can pass the tuning
half and miss on validation. This benchmark runs the savings benchmark's backtest of each
trace twice in one run, on the served ladder and on another (by default 0.025 apart from
0.275 to 0.1, the reactive knob's own spacing above 0.3), every policy given the same
ladder, and reports each policy's validation cost side by side and what happens to hybrid's
verdicts against the reactive HPA and the peers, under the served tuning rule and under the
stricter and looser rules of ``benchmarks/tuning_rules.py``.

Run: ``.venv/bin/python benchmarks/rung_spacing.py [--ladder 0.275,0.25,...] [--traces a,b]
[--jobs 2] [--data ../shared/data]``. The default traces are the five where a tuned setting
of ``benchmarks/results/backtest_savings.md`` is a rung; on the three others none is, and a
rung is dearer than any setting of the fine grid. Writes ``benchmarks/results/
rung_spacing.md`` and ``.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import tuning_rules
from benchmarks.backtest_savings import DATA, POLICIES, RESULTS, loaders
from benchmarks.progress import finished
from benchmarks.traces import chosen_traces
from benchmarks.tuning_rules import MARGINS, cost_cell, label
from forecaster.backtest.tuning import TUNING_MARGIN
from forecaster.models import DEFAULT_MODEL
from forecaster.policies import PEER_POLICIES, reach
from forecaster.policies.reactive import UTILIZATION_GRID
from prewarm.backtest_report import knob_text

BURSTY = (
    "twitter_volume_amzn_5min",
    "asg_cpu_utilization_5min",
    "steady-diurnal",
    "viral-launch",
    "office-hours",
)
FINER = tuple(round(0.275 - 0.025 * i, 3) for i in range(8))


def ladder_arg(text: str) -> tuple[float, ...]:
    """``--ladder``: distinct utilizations, most first, each in (0, the fine grid's lowest)."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ladder takes numbers, got {text[:80]!r}") from None
    edge = min(UTILIZATION_GRID)
    if not values or any(not 0 < v < edge for v in values):
        raise argparse.ArgumentTypeError(
            f"--ladder takes utilizations in (0, {edge}) past the fine grids, got {text[:80]!r}"
        )
    if list(values) != sorted(set(values), reverse=True):
        raise argparse.ArgumentTypeError(
            f"--ladder takes distinct utilizations from most to least, got {text[:80]!r}"
        )
    return values


@contextmanager
def ladder(utilizations: Sequence[float]) -> Iterator[None]:
    """Every grid built inside ends in the rungs ``utilizations`` instead of the served ones.

    The grids read :data:`forecaster.policies.reach.REACH` when built; the benchmark swaps it
    for the span of one backtest, in its own worker process, and puts the served one back.
    """
    served = reach.REACH
    reach.REACH = tuple(utilizations)
    try:
        yield
    finally:
        reach.REACH = served


def run(name: str, data: Path, model: str, utilizations: Sequence[float]) -> dict[str, Any]:
    """:func:`benchmarks.tuning_rules.run` on one ladder: the trace's backtest, each policy
    tuned under every rule (the served one among them) and scored on validation."""
    with ladder(utilizations):
        return tuning_rules.run(name, data, model)


def verdict(deployed: Mapping[str, Mapping[str, Any]], other: str) -> str:
    """Hybrid against ``other`` on validation: its saving where both hold the SLO, else who
    holds it."""
    ours, theirs = deployed["hybrid"], deployed[other]
    if ours["meets_slo"] and theirs["meets_slo"]:
        return f"{1 - ours['cost'] / theirs['cost']:+.1%}"
    if ours["meets_slo"]:
        return "only hybrid holds"
    return f"only {other} holds" if theirs["meets_slo"] else "neither holds"


def best_peer(deployed: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The cheapest peer that holds the SLO on validation, if one does."""
    holding = [p for p in PEER_POLICIES if deployed[p]["meets_slo"]]
    return min(holding, key=lambda p: deployed[p]["cost"]) if holding else None


def peer_cell(deployed: Mapping[str, Mapping[str, Any]]) -> str:
    """Hybrid against the cheapest peer holding the SLO, naming it; or who holds it."""
    peer = best_peer(deployed)
    if peer is None:
        return "only hybrid holds" if deployed["hybrid"]["meets_slo"] else "none holds"
    return f"{verdict(deployed, peer)} ({peer})"


def markdown(
    rows: Mapping[str, Mapping[str, Any]],
    ladders: Mapping[str, Sequence[float]],
    model: str,
    seconds: float,
    jobs: int,
) -> str:
    """The report: verdicts per trace and ladder under the served rule and under each rule,
    then every policy's cost on each ladder under the served rule."""
    served, other = ladders
    rule = label(TUNING_MARGIN)
    text = ", ".join(f"`{k}` ({', '.join(f'{u:g}' for u in v)})" for k, v in ladders.items())
    lines = [
        "# Rung spacing: how much the tuned rows depend on the ladder of reach",
        "",
        f"Forecast model `{model}`; the backtest of `benchmarks/backtest_savings.py` (cold "
        "start 5 min, SLO 0.1 % unserved within 30 s, tuned on the first half, scored on the "
        f"second), run on two ladders of rungs, every policy given the same: {text}. Rule "
        "`1/k`: each policy's cheapest setting that left at most 1/k of the SLO's unserved "
        f"work on the tuning half (`benchmarks/tuning_rules.py`); `{rule}` is served. "
        f"Generated by `benchmarks/rung_spacing.py` in {seconds:,.0f} s with {jobs} worker(s).",
        "",
        f"Hybrid against the reactive HPA and against the cheapest peer holding the SLO, rule "
        f"`{rule}` (`1 - hybrid / other` on validation where both hold it):",
        "",
        f"| trace | vs reactive, {served} | vs reactive, {other} "
        f"| vs best peer, {served} | vs best peer, {other} |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        cells = [verdict(row[k]["rules"][rule], "reactive") for k in ladders]
        cells += [peer_cell(row[k]["rules"][rule]) for k in ladders]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    labels = [label(m) for m in MARGINS]
    lines += [
        "",
        f"Hybrid against the reactive HPA under each rule, `{served}` / `{other}`:",
        "",
        "| trace | " + " | ".join(f"rule {x}" for x in labels) + " |",
        "|---|" + "---:|" * len(labels),
    ]
    for name, row in rows.items():
        cells = [
            " / ".join(verdict(row[k]["rules"][x], "reactive") for k in ladders) for x in labels
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, row in rows.items():
        lines += [
            "",
            f"## {name}, rule {rule}",
            "",
            f"| policy | {served} | {other} | {other} / {served} | setting on {other}, where "
            "it differs |",
            "|---|---:|---:|---:|---|",
        ]
        for policy in POLICIES:
            a, b = row[served]["rules"][rule][policy], row[other]["rules"][rule][policy]
            ratio = f"{b['cost'] / a['cost']:.3f}" if a["cost"] > 0 else "-"
            moved = "" if a["params"] == b["params"] else knob_text(b["params"])
            lines.append(f"| {policy} | {cost_cell(a)} | {cost_cell(b)} | {ratio} | {moved} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ladder", type=ladder_arg, default=FINER, help="Comma-separated.")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DATA, help="Directory of the traces.")
    parser.add_argument("--traces", default=",".join(BURSTY), help="Comma-separated subset.")
    parser.add_argument("--jobs", type=int, default=1, help="Backtests run in parallel.")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where results are written.")
    args = parser.parse_args()
    names = chosen_traces(parser, list(loaders(args.data)), args.traces)
    ladders = {"served": reach.REACH, "finer": args.ladder}
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {
            (n, k): pool.submit(run, n, args.data, args.model, v)
            for n in names
            for k, v in ladders.items()
        }
        done = finished(
            futures, lambda key, row: f"{key[0]} on the {key[1]} ladder, {row['seconds']:.0f} s"
        )
        rows = {n: {k: done[n, k] for k in ladders} for n in names}
    seconds = time.perf_counter() - began
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rung_spacing.md").write_text(
        markdown(rows, ladders, args.model, seconds, args.jobs)
    )
    document = {"model": args.model, "ladders": ladders, "seconds": seconds, "traces": rows}
    (args.out / "rung_spacing.json").write_text(json.dumps(document, indent=1, default=float))
    print(f"wrote {args.out / 'rung_spacing'}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
