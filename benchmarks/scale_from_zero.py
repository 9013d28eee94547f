"""Waking from zero: ``min_replicas`` 0 against 1 on sparse traffic, deployed and out of sample.

With ``min_replicas`` 0, KEDA owns 0 <-> 1 (:mod:`forecaster.activation`): the reactive HPA
wakes when KEDA's poll (every 30 s) sees demand on its ``prometheus`` trigger, hybrid also
when prewarm's push trigger says the lead window's forecast gives ``P(demand > 0) > p``, with
``p`` tuned with hybrid's other settings; both scale back to 0 after the 300 s cooldown. Each
policy is tuned on the first half of the scored span and scored on the second, as in
``benchmarks/backtest_savings.py``; the same forecasts feed both floors.

Reported per trace, floor and policy on validation: cost, unserved fraction, whether the SLO
holds, the work left unserved while no replica was ready (the cost of waking up late), and the
wake-ups per day.

Run: ``.venv/bin/python benchmarks/scale_from_zero.py [--model lightgbm] [--scenarios a,b]
[--peak-replicas 4]``. Scenarios are seeded (:data:`forecaster.scenarios.SCENARIOS`), 28 days
at 1 minute. Cold start 5 minutes, capacity sized so the 99th percentile of demand needs
``--peak-replicas`` replicas, SLO 0.1 % of the work unserved within 30 s. Writes
``benchmarks/results/scale_from_zero.md`` and ``.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import add_tuning_margin, backtest_settings
from forecaster.backtest.frontier import run_policy
from forecaster.backtest.run import backtest
from forecaster.backtest.tuning import TUNING_MARGIN, VALIDATION, rule_text, split
from forecaster.frame import regularize
from forecaster.models import DEFAULT_MODEL
from forecaster.scenarios import SCENARIOS
from forecaster.workload import WorkloadSpec
from prewarm.backtest_report import deployed_row, knob_text

RESULTS = Path(__file__).resolve().parent / "results"
POLICIES = ("static", "reactive", "hybrid", "oracle")
COMPARED = ("reactive", "hybrid")
FLOORS = (1, 0)
DAY = 86400


def wake_metrics(result: Any, policy: str, params: dict[str, float], seed: int) -> dict[str, Any]:
    """The deployed setting's validation run: work lost while no replica was ready, over all
    the work, and the wake-ups (0 asked -> some) per day."""
    obs = result.observation
    trajectory, _ = run_policy(obs, policy, params, seed)
    window = split(len(obs.sim_rate), obs.scored)[VALIDATION]
    arrived = float(trajectory.arrivals[window].sum())
    cold = window & (trajectory.ready == 0)
    asleep = trajectory.asked == 0
    wakes = window[1:] & asleep[:-1] & ~asleep[1:]
    days = float(window.sum()) * obs.sim_step / DAY
    return {
        "unserved_asleep_fraction": float(trajectory.unserved[cold].sum()) / arrived,
        "wakes_per_day": float(wakes.sum()) / days,
        "asleep_fraction": float((window & asleep).sum()) / float(window.sum()),
    }


def run(
    name: str,
    model: str,
    peak_replicas: int,
    seed: int = 0,
    tuning_margin: float = TUNING_MARGIN,
) -> dict[str, Any]:
    """One scenario at both floors."""
    frame = regularize(SCENARIOS[name](28, 60, 0), 60)
    values = frame["value"].to_numpy(dtype=float)
    times = pd.DatetimeIndex(frame["timestamp"])
    capacity = float(np.nanquantile(values, 0.99)) / peak_replicas
    rows: dict[str, Any] = {}
    for floor in FLOORS:
        began = time.perf_counter()
        spec = WorkloadSpec(
            capacity_per_replica=capacity,
            cold_start=300,
            min_replicas=floor,
            max_replicas=int(np.ceil(np.nanmax(values) / (capacity * 0.5))) + 1,
        )
        settings = replace(backtest_settings(spec, POLICIES, model, tuning_margin), seed=seed)
        result = backtest(values, times, 60, settings)
        rows[f"min_replicas={floor}"] = {
            policy: deployed_row(chosen)
            | (wake_metrics(result, policy, chosen.params, seed) if policy in COMPARED else {})
            for policy, chosen in result.deployed.items()
        } | {"seconds": time.perf_counter() - began}
    return rows


def markdown(
    results: dict[str, dict[str, Any]],
    model: str,
    peak: int,
    tuning_margin: float = TUNING_MARGIN,
) -> str:
    """The comparison as a Markdown report."""
    lines = [
        "# Waking from zero: min_replicas 0 against 1",
        "",
        f"Forecast model `{model}`; cold start 5 min; capacity per replica = p99 of demand / "
        f"{peak}; SLO: at most 0.1 % of the work unserved within 30 s. KEDA defaults: "
        "activation polled every 30 s (prewarm's trigger pushed), scale to 0 after 300 s "
        "without activity. Each policy tuned on the first half of the scored span (its "
        f"cheapest setting that {rule_text(tuning_margin)} there), scored on the second. "
        "Generated by `benchmarks/scale_from_zero.py`.",
        "",
        "| trace | floor | policy | cost | unserved | meets SLO | unserved while at 0 | "
        "wake-ups/day | time at 0 | setting |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, floors in results.items():
        for floor, row in floors.items():
            for policy in POLICIES:
                d = row[policy]
                setting = knob_text(d["settings"])
                asleep = (
                    (
                        f"{d['unserved_asleep_fraction']:.3%}",
                        f"{d['wakes_per_day']:.1f}",
                        f"{d['asleep_fraction']:.0%}",
                    )
                    if policy in COMPARED
                    else ("", "", "")
                )
                lines.append(
                    f"| {name} | {floor.split('=')[1]} | {policy} | {d['cost']:,.0f} | "
                    f"{d['unserved_fraction']:.3%} | {'yes' if d['meets_slo'] else 'no'} | "
                    + " | ".join(asleep)
                    + f" | {setting} |"
                )
    lines += ["", "Cost ratio of min_replicas 0 to 1 (validation cost, same policy):", ""]
    for name, floors in results.items():
        parts = []
        for policy in POLICIES:
            zero, one = (floors[f"min_replicas={f}"][policy]["cost"] for f in (0, 1))
            parts.append(f"{policy} {zero / one:.2f}")
        lines.append(f"- **{name}**: " + ", ".join(parts))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--scenarios", default="office-hours,viral-launch")
    parser.add_argument("--peak-replicas", type=int, default=4)
    add_tuning_margin(parser)
    parser.add_argument("--out", type=Path, default=RESULTS / "scale_from_zero")
    args = parser.parse_args()
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    results = {
        name: run(name, args.model, args.peak_replicas, tuning_margin=args.tuning_margin)
        for name in names
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    report = markdown(results, args.model, args.peak_replicas, args.tuning_margin)
    args.out.with_suffix(".md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
