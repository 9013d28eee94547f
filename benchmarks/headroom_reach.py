"""What it takes to hold the SLO where no policy's grid does: the same rungs past every grid.

On twitter at a 5-minute cold start no adaptive policy's tuned setting holds the SLO out of
sample (``benchmarks/backtest_savings.py``), and on the bursty scenarios only hybrid's does:
the bursts are larger than the margin most grids reach. This benchmark gives each policy the
same four rungs past the cautious end of its grid, the path that carries its margin at
utilization ``u`` of :data:`RUNGS` (4x to 10x what that path sizes for), tunes every policy
again on its grid and the rungs by the same rule, and scores the choice on validation. It
answers whether prediction or plain headroom is the cheaper way to that SLO, with every
policy given the same reach.

Rungs, per policy:

- ``reactive``, ``dynamo-planner``: target utilization ``u``;
- ``predictive``: its q0.99 at utilization ``u``;
- ``hybrid``: its q0.99 forecast path at ``u``, the reactive path at 1, tolerance 0.1, no
  buffer;
- ``aws-predictive``: the forecast's scheduled capacity at ``u``, target tracking at 1,
  tolerance 0.1;
- ``crane-dsp``: margin ``1/u - 1`` over its prediction, the HPA at 1, tolerance 0.1.

``static`` already reaches twice the training window's peak, and the quantiles of
``keda-cron`` and ``buffered`` end at the window's maximum: they keep their grids.

Same backtest as ``benchmarks/backtest_savings.py``: cold start 5 min, capacity per replica
the p99 of demand / 20, SLO 0.1 % of the work unserved within 30 s, tuned on the first half
of the scored span, scored on the second. Run: ``.venv/bin/python benchmarks/headroom_reach.py
[--traces twitter_volume_amzn_5min,viral-launch] [--model lightgbm]`` (default: the bursty
public traces and the scenarios). Writes ``benchmarks/results/headroom_reach.md`` and
``.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import (
    DATA,
    add_tuning_margin,
    loaders,
    trace_backtest,
    write_results,
)
from benchmarks.traces import chosen_traces
from forecaster.backtest.frontier import sweep
from forecaster.backtest.tuning import (
    TUNING_MARGIN,
    VALIDATION,
    deploy,
    hours,
    rule_text,
    split,
)
from forecaster.models import DEFAULT_MODEL
from forecaster.policies.base import Grid
from forecaster.policies.predictive import QUANTILE_GRID
from prewarm.backtest_report import deployed_row, knob_text

RESULTS = Path(__file__).resolve().parent / "results"
RUNGS = (0.25, 0.2, 0.15, 0.1)
TOP = QUANTILE_GRID[-1]
# The traces where some policy's grid falls short of the SLO: the bursty public ones and the
# scenarios (on the smooth traces every grid holds it and the rungs are never the cheapest).
DEFAULT_TRACES = (
    "twitter_volume_amzn_5min",
    "asg_cpu_utilization_5min",
    "steady-diurnal",
    "viral-launch",
    "office-hours",
)


def rungs(u: float) -> dict[str, dict[str, float]]:
    """Each extended policy's setting at rung ``u``."""
    beside = {"target_utilization": 1.0, "tolerance": 0.1}
    return {
        "reactive": {"target_utilization": u, "tolerance": 0.1},
        "dynamo-planner": {"target_utilization": u},
        "predictive": {"quantile": TOP, "target_utilization": u},
        "hybrid": {"quantile": TOP, "forecast_utilization": u, "buffer_quantile": 0.0} | beside,
        "aws-predictive": {"forecast_utilization": u} | beside,
        "crane-dsp": {"margin": round(1 / u - 1, 6)} | beside,
    }


def ladders() -> dict[str, Grid]:
    """The rungs of :data:`RUNGS`, per extended policy."""
    settings = [rungs(u) for u in RUNGS]
    return {name: tuple(s[name] for s in settings) for name in settings[0]}


def run(name: str, data: Path, model: str, tuning_margin: float = TUNING_MARGIN) -> dict[str, Any]:
    """One trace: each policy tuned on its grid, and on its grid and the rungs."""
    began = time.perf_counter()
    result = trace_backtest(name, data, model, tuning_margin)
    obs = result.observation
    windows = split(len(obs.sim_rate), obs.scored)
    extended = ladders()
    extra = sweep(obs, list(extended), seed=0, windows=windows, grids=extended)
    frontier = {p: [*points, *extra.get(p, [])] for p, points in result.frontier.items()}
    reached = deploy(
        frontier,
        obs.spec.slo_unserved_fraction,
        hours(windows[VALIDATION], obs.sim_step),
        tuning_margin,
    )
    return {
        "grid": {p: deployed_row(d) for p, d in result.deployed.items()},
        "reached": {p: deployed_row(d) for p, d in reached.items()},
        "extended": sorted(extra),
        "seconds": time.perf_counter() - began,
    }


def _cell(row: dict[str, Any]) -> str:
    verdict = "" if row["meets_slo"] else ", misses"
    return f"{row['cost']:,.0f}, {row['unserved_fraction']:.3%}{verdict}"


def cheapest_adaptive(rows: dict[str, dict[str, Any]]) -> str | None:
    """The adaptive policy (not the oracle, not static) cheapest on validation among those
    that meet the SLO there."""
    meeting = {
        p: r["cost"] for p, r in rows.items() if r["meets_slo"] and p not in ("oracle", "static")
    }
    return min(meeting, key=lambda p: meeting[p]) if meeting else None


def markdown(results: dict[str, dict[str, Any]], model: str, tuning_margin: float) -> str:
    """The report: per trace, each policy on its grid and with the rungs."""
    seconds = sum(r["seconds"] for r in results.values())
    lines = [
        "# Headroom reach: every grid extended by the same rungs",
        "",
        f"Forecast model `{model}`; the backtest of `benchmarks/backtest_savings.py` (cold "
        "start 5 min, SLO 0.1 % of the work unserved within 30 s), each policy's setting the "
        f"cheapest that {rule_text(tuning_margin)} on the first half of the scored span "
        "(else the closest), scored on the second. Rungs: the path carrying each policy's "
        f"margin at utilization {', '.join(f'{u:g}' for u in RUNGS)} (see the module's "
        f"docstring). Generated by `benchmarks/headroom_reach.py` in {seconds:,.0f} s.",
        "",
        "Cells: validation cost, unserved fraction.",
    ]
    for name, r in results.items():
        lines += [
            "",
            f"## {name}",
            "",
            "| policy | on its grid | with the rungs | setting with the rungs |",
            "|---|---|---|---|",
        ]
        for policy, row in r["reached"].items():
            grid = _cell(r["grid"][policy])
            reached = _cell(row) if policy in r["extended"] else "(no rungs)"
            lines.append(f"| {policy} | {grid} | {reached} | {knob_text(row['settings'])} |")
        best = cheapest_adaptive(r["reached"])
        lines += [
            "",
            "Cheapest adaptive policy holding the SLO with the rungs: "
            + (f"**{best}**." if best else "none."),
        ]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; unknown traces exit 2, naming them."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DATA, help="Directory of the traces.")
    parser.add_argument("--traces", default=",".join(DEFAULT_TRACES))
    add_tuning_margin(parser)
    parser.add_argument("--out", type=Path, default=RESULTS / "headroom_reach")
    args = parser.parse_args(argv)
    args.names = chosen_traces(parser, list(loaders(args.data)), args.traces, "traces")
    return args


def main() -> None:
    args = parse_args()
    results = {}
    for name in args.names:
        results[name] = run(name, args.data, args.model, args.tuning_margin)
        print(f"{name}: {results[name]['seconds']:.0f} s", file=sys.stderr, flush=True)
    write_results(args.out, results, markdown(results, args.model, args.tuning_margin))


if __name__ == "__main__":
    main()
