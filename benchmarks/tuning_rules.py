"""How much margin the tuned setting needs to hold the SLO out of sample.

The backtest tunes every policy by one rule: its cheapest setting that meets the SLO on the
tuning window (the first half of the scored span). On a trace whose second half holds a
regime change, the cheapest setting that just met the SLO there can miss it on validation.
This benchmark runs the same backtest as ``benchmarks/backtest_savings.py`` once per trace
and applies stricter rules to the same simulated settings: the cheapest setting whose tuning
window left at most a fraction (1, 1/2, 1/4) of the SLO's unserved work. Every policy is held
to the same rule; each is scored on validation against the SLO itself.

It reports, per rule: how many of the policies meet the SLO on validation on each trace,
hybrid's validation cost (or what it leaves unserved), what the margin costs where the
plain rule already held, and every policy's validation cost under each rule.

Run: ``.venv/bin/python benchmarks/tuning_rules.py [--model lightgbm] [--traces a,b]
[--data ../shared/data]``. Writes ``benchmarks/results/tuning_rules.md`` and ``.json``
(``_subset`` when not every trace ran) unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import (
    DATA,
    POLICIES,
    RESULTS,
    loaders,
    policy_table,
    trace_backtest,
)
from benchmarks.traces import chosen_traces
from forecaster.backtest.frontier import PolicyPoint
from forecaster.backtest.tuning import TUNING_MARGIN, deploy
from forecaster.models import DEFAULT_MODEL
from forecaster.policies import PEER_POLICIES

# The share of the SLO's unserved work a setting may leave on the tuning window.
MARGINS = (1.0, 0.5, 0.25)


def apply_rules(
    frontier: Mapping[str, Sequence[PolicyPoint]],
    slo_unserved: float,
    validation_hours: float,
    margins: Sequence[float] = MARGINS,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Each policy tuned under each margin: rule label -> policy -> its chosen setting and its
    validation cost, unserved fraction and whether that meets the SLO itself.

    >>> from forecaster.backtest.metrics import Metrics
    >>> def point(cost, tuning, validation):
    ...     m = lambda u: Metrics(cost, cost, u, 0.0, 0, 0, 1.0)
    ...     windows = {"tuning": m(tuning), "validation": m(validation)}
    ...     return PolicyPoint("p", {"k": cost}, m(tuning), windows)
    >>> frontier = {"p": [point(1.0, 0.0009, 0.002), point(2.0, 0.0004, 0.0008)]}
    >>> rules = apply_rules(frontier, 0.001, 24.0)
    >>> rules["1"]["p"]["meets_slo"], rules["1/2"]["p"]["meets_slo"]
    (False, True)
    """
    out = {}
    for margin in margins:
        tuned = deploy(frontier, slo_unserved, validation_hours, margin)
        out[label(margin)] = {
            policy: {
                "params": chosen.params,
                "cost": chosen.validation.cost,
                "unserved_fraction": chosen.validation.unserved_fraction,
                "meets_slo": chosen.meets_slo,
            }
            for policy, chosen in tuned.items()
        }
    return out


def label(margin: float) -> str:
    """``1``, ``1/2``, ``1/4``: the share of the SLO a rule allows on the tuning window."""
    return "1" if margin == 1 else f"1/{round(1 / margin)}"


def run(name: str, data: Path, model: str) -> dict[str, Any]:
    """One trace's backtest, tuned under every rule."""
    began = time.perf_counter()
    result = trace_backtest(name, data, model)
    first = next(iter(result.deployed.values()))
    return {
        "rules": apply_rules(result.frontier, first.slo_unserved, first.validation_hours),
        "seconds": time.perf_counter() - began,
    }


def rule_header(columns: Sequence[str], labels: Sequence[str], align: str = "---:") -> list[str]:
    """A per-trace table's header: a column per title of ``columns`` and rule of ``labels``."""
    cells = [f"{column}, rule {x}" for column in columns for x in labels]
    return ["| trace | " + " | ".join(cells) + " |", "|---|" + f"{align}|" * len(cells)]


def cost_cell(tuned: Mapping[str, Any]) -> str:
    """A tuned policy's validation cost, or what it leaves unserved where it misses."""
    if tuned["meets_slo"]:
        return f"{tuned['cost']:,.0f}"
    return f"misses ({100 * tuned['unserved_fraction']:.2f}%)"


def _policy_tables(rows: Mapping[str, Mapping[str, Any]], labels: Sequence[str]) -> list[str]:
    """Per rule, every policy's validation cost on every trace: the full savings table that
    rule gives (the savings benchmark's at rule ``1/2``)."""
    lines = []
    for x in labels:
        lines += ["", f"## Validation cost per policy, rule {x}", ""]
        lines += policy_table(rows, _costs_under(x))
    return lines


def _costs_under(rule: str) -> Callable[[Mapping[str, Any], str], str]:
    """A trace's row -> each policy's validation cost under ``rule``, as a table cell."""
    return lambda row, policy: cost_cell(row["rules"][rule][policy])


def _peers_beaten(row: Mapping[str, Any]) -> str:
    """How many peers hybrid is cheaper than, or meets the SLO where they do not."""
    hybrid = row["hybrid"]
    if not hybrid["meets_slo"]:
        return "-"
    beaten = sum(not row[p]["meets_slo"] or hybrid["cost"] < row[p]["cost"] for p in PEER_POLICIES)
    return f"{beaten}/{len(PEER_POLICIES)}"


def markdown(rows: Mapping[str, Mapping[str, Any]], model: str) -> str:
    """The report: per trace and rule, policies meeting the SLO, hybrid's cost and peers,
    then every policy's validation cost under each rule."""
    labels = [label(m) for m in MARGINS]
    seconds = sum(r["seconds"] for r in rows.values())
    lines = [
        "# Tuning rules: the margin a tuned setting needs out of sample",
        "",
        f"Forecast model `{model}`; the backtest of `benchmarks/backtest_savings.py` (cold start "
        "5 min, SLO 0.1 % unserved within 30 s, tuned on the first half, scored on the "
        "second). Rule `1/k`: each policy's cheapest setting that left at most 1/k of the "
        "SLO's unserved work on the tuning window (the closest when none did); rule "
        f"`{label(TUNING_MARGIN)}` is the default. Generated by `benchmarks/tuning_rules.py` "
        f"in {seconds:,.0f} s.",
        "",
        f"Policies: {len(POLICIES)} ({', '.join(POLICIES)}).",
        "",
        *rule_header(("meet SLO", "hybrid", "peers beaten"), labels),
    ]
    for name, row in rows.items():
        rules = row["rules"]
        meets = [sum(p["meets_slo"] for p in rules[x].values()) for x in labels]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{m}/{len(POLICIES)}" for m in meets)
            + " | "
            + " | ".join(cost_cell(rules[x]["hybrid"]) for x in labels)
            + " | "
            + " | ".join(_peers_beaten(rules[x]) for x in labels)
            + " |"
        )
    lines += [
        "",
        "What each margin costs where the plain rule already met the SLO on validation "
        "(validation cost over rule `1`'s, mean over those policies and traces):",
        "",
    ]
    plain = labels[0]
    for x in labels[1:]:
        ratios = [
            row["rules"][x][p]["cost"] / row["rules"][plain][p]["cost"]
            for row in rows.values()
            for p in POLICIES
            if row["rules"][plain][p]["meets_slo"] and row["rules"][plain][p]["cost"] > 0
        ]
        if not ratios:
            lines.append(f"- rule {x}: no policy met the SLO on validation under rule `1`")
            continue
        mean = sum(ratios) / len(ratios)
        lines.append(f"- rule {x}: {mean:.3f}x over {len(ratios)} policy-trace pairs")
    return "\n".join(lines + _policy_tables(rows, labels)) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DATA, help="Directory of the traces.")
    parser.add_argument("--traces", help="Comma-separated subset (default: all).")
    parser.add_argument("--out", type=Path, default=RESULTS, help="Where results are written.")
    args = parser.parse_args()
    known = list(loaders(args.data))
    names = chosen_traces(parser, known, args.traces)
    rows = {}
    for number, name in enumerate(names, start=1):
        rows[name] = run(name, args.data, args.model)
        print(f"[{number}/{len(names)}] {name}: {rows[name]['seconds']:.0f} s", file=sys.stderr)
    stem = "tuning_rules" if len(names) == len(known) else "tuning_rules_subset"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.md").write_text(markdown(rows, args.model))
    document = {"model": args.model, "traces": rows}
    (args.out / f"{stem}.json").write_text(json.dumps(document, indent=1, default=float))
    print(f"wrote {args.out / stem}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
