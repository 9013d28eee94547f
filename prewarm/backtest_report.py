"""Writes a backtest result: JSON, Markdown, PNG plots and a rich table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecaster.backtest.frontier import RECOMMENDED, compared, run_policy
from forecaster.backtest.run import BacktestResult
from forecaster.backtest.tuning import Deployed, rule_text
from forecaster.policies import reach
from prewarm import tables
from prewarm.options import console
from prewarm.spans import duration_text, span_text
from training.documents import dumps

JSON_NAME, MARKDOWN_NAME = "backtest.json", "backtest.md"
CAPACITY_PNG, FRONTIER_PNG = "capacity.png", "frontier.png"
# Excluded gaps listed in the JSON, and in the note under the table; the count is always whole.
EXCLUDED_IN_JSON, EXCLUDED_IN_NOTE = 20, 3


def _knob(params: dict[str, float]) -> dict[str, float] | None:
    return dict(params) or None


def to_json(
    result: BacktestResult, source: dict[str, Any], notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The stable JSON document (keys documented in the ``prewarm backtest`` help).

    ``source`` says where the data came from (path, workload); its rows, step and span are
    read off ``result``. ``notes`` are lines the reports print below the table (a shortened
    training window).
    """
    obs = result.observation
    spec = obs.spec
    start = result.times[obs.start]
    end = result.times[-1] + (result.times[1] - result.times[0])
    policies = {}
    for name, (point, meets) in result.headline.items():
        policies[name] = {
            "knob": _knob(point.params),
            **point.metrics.to_dict(),
            "meets_slo": meets,
        }
    return {
        "data": {
            **source,
            "rows": len(result.times),
            "step_seconds": int(obs.data_step),
            "start": result.times[0].isoformat(),
            "end": result.times[-1].isoformat(),
        },
        "evaluation": {
            "start": start.isoformat(),
            "end": end.isoformat(),
            "hours": (end - start).total_seconds() / 3600.0,
            "excluded": _excluded(result),
        },
        "settings": {
            "cold_start_seconds": spec.cold_start_model.planning_seconds,
            "capacity_per_replica": spec.capacity_per_replica,
            "replica_hour_cost": spec.replica_hour_cost,
            "tier": spec.tier,
            "slo_latency_seconds": spec.slo_latency_seconds,
            "slo_unserved_fraction": spec.slo_unserved_fraction,
            "target_utilization": spec.target_utilization,
            "min_replicas": spec.min_replicas,
            "max_replicas": spec.max_replicas,
            "train_window_seconds": obs.train_window * obs.data_step,
            "retrain_every_seconds": obs.retrain_every * obs.data_step,
        },
        "policies": policies,
        "frontier": {
            name: [
                {
                    "knob": _knob(p.params),
                    "replica_hours": p.metrics.replica_hours,
                    "cost": p.metrics.cost,
                    "unserved_fraction": p.metrics.unserved_fraction,
                }
                for p in points
            ]
            for name, points in result.frontier.items()
        },
        "cost_at_slo": result.cost_at_slo,
        "savings_at_slo": result.savings_at_slo,
        "forecast": {
            model: {
                "horizon_seconds": score.horizon_seconds,
                "mase": score.mase,
                "pinball": {str(q): v for q, v in score.pinball.items()},
                "coverage": {str(q): v for q, v in score.coverage.items()},
                "missing": score.missing,
            }
            for model, score in result.forecast.items()
        },
        "deployed": _deployed(result, end),
        "skipped": result.skipped,
        "notes": list(notes),
    }


def _deployed(result: BacktestResult, end: Any) -> dict[str, Any]:
    """Each policy at the setting tuned on the tuning window, scored on validation."""
    assert result.validation_start is not None  # backtest() always sets it
    tuning = {"start": result.times[result.observation.start].isoformat()}
    tuning["end"] = validation_start = result.validation_start.isoformat()
    validation = {"start": validation_start, "end": end.isoformat()}
    policies = {
        name: {"tuning": tuning, "validation": validation, **deployed_row(chosen)}
        for name, chosen in result.deployed.items()
    }
    return {
        "tuning": tuning,
        "validation": validation,
        "tuning_margin": result.tuning_margin,
        "policies": policies,
        "savings": result.deployed_savings,
    }


def deployed_row(chosen: Deployed) -> dict[str, Any]:
    """One policy's chosen setting and what it did on each window, for the JSON."""
    return {
        "settings": dict(chosen.params),
        "tuned_meets_slo": chosen.tuned_meets_slo,
        "tuning_cost": chosen.tuning.cost,
        "tuning_unserved_fraction": chosen.tuning.unserved_fraction,
        "cost": chosen.validation.cost,
        "replica_hours": chosen.validation.replica_hours,
        "unserved_fraction": chosen.validation.unserved_fraction,
        "meets_slo": chosen.meets_slo,
        "cold_starts_per_hour": chosen.cold_starts_per_hour,
        "scale_events_per_hour": chosen.scale_events_per_hour,
        "settings_tried": chosen.settings_tried,
    }


def _excluded(result: BacktestResult) -> dict[str, Any]:
    """Cells of the evaluation in gaps of the data too long to interpolate, not scored."""
    obs, times = result.observation, result.times
    step = times[1] - times[0]
    cells = sum(end - begin for begin, end in obs.excluded)
    return {
        "cells": cells,
        "seconds": cells * obs.data_step,
        "gaps": len(obs.excluded),
        "intervals": [
            [times[begin].isoformat(), (times[end - 1] + step).isoformat()]
            for begin, end in obs.excluded[:EXCLUDED_IN_JSON]
        ],
    }


def _excluded_note(excluded: dict[str, Any]) -> list[str]:
    if not excluded["cells"]:
        return []
    shown = "; ".join(span_text(a, b) for a, b in excluded["intervals"][:EXCLUDED_IN_NOTE])
    more = excluded["gaps"] - min(EXCLUDED_IN_NOTE, len(excluded["intervals"]))
    return [
        f"not scored: {duration_text(excluded['seconds'])} ({excluded['cells']} cells) in "
        f"{excluded['gaps']} gap(s) of the data too long to interpolate, simulated through: "
        + shown
        + (f"; and {more} more" if more else "")
    ]


def print_table(document: dict[str, Any]) -> None:
    """The in-sample frontier's best points, the deployed (out-of-sample) table and the
    savings line on stdout (see :mod:`prewarm.tables`)."""
    out = console()
    tables.print_table(out, policy_table(document))
    tables.print_table(out, deployed_table(document))
    out.print(savings_line(document), markup=False, highlight=False, soft_wrap=True)
    for line in (edge_line(document), headroom_line(document)):
        if line is not None:
            out.print(line, markup=False, highlight=False, soft_wrap=True)


# Table columns: header, the policy row's value as text.
POLICY_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("knob", lambda row: knob_text(row["knob"], "\n")),
    ("cost", lambda row: f"{row['cost']:,.1f}"),
    ("replica\nhours", lambda row: f"{row['replica_hours']:,.1f}"),
    ("unserved", lambda row: f"{row['unserved_fraction']:.2e}"),
    ("SLO\nmin", lambda row: f"{row['slo_violation_minutes']:,.0f}"),
    ("cold\nstarts", lambda row: str(row["cold_starts"])),
    ("meets\nSLO", lambda row: "yes" if row["meets_slo"] else "no"),
)


def policy_table(document: dict[str, Any]) -> tables.TableSpec:
    """Each policy at its cost-at-SLO point (or closest to the SLO), over the scored span;
    the policies skipped and the notes below."""
    slo = document["settings"]["slo_unserved_fraction"]
    evaluation = document["evaluation"]
    span = span_text(evaluation["start"], evaluation["end"])
    return tables.TableSpec(
        title=f"Cost at SLO (unserved <= {slo:g}), scored {span}",
        key="policy",
        headers=tuple(header for header, _ in POLICY_COLUMNS),
        rows=[
            (name, [cell(row) for _, cell in POLICY_COLUMNS])
            for name, row in document["policies"].items()
        ],
        notes=[f"{name} skipped: {reason}" for name, reason in document["skipped"].items()]
        + _excluded_note(evaluation["excluded"])
        + document["notes"]
        + [units_note(document["settings"])],
        left=("knob",),
    )


DEPLOYED_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("setting", lambda row: knob_text(row["settings"], "\n")),
    ("cost", lambda row: f"{row['cost']:,.1f}"),
    ("unserved", lambda row: f"{row['unserved_fraction']:.2e}"),
    ("meets\nSLO", lambda row: "yes" if row["meets_slo"] else "no"),
    ("met on\ntuning", lambda row: "yes" if row["tuned_meets_slo"] else "no"),
    ("cold\nstarts/h", lambda row: f"{row['cold_starts_per_hour']:.1f}"),
    ("scale\nevents/h", lambda row: f"{row['scale_events_per_hour']:.1f}"),
    ("settings\ntried", lambda row: str(row["settings_tried"])),
)


def deployed_table(document: dict[str, Any]) -> tables.TableSpec:
    """Each policy at the setting tuned on the tuning window, scored on validation."""
    deployed = document["deployed"]
    tuning, validation = deployed["tuning"], deployed["validation"]
    rule = rule_text(deployed["tuning_margin"])
    return tables.TableSpec(
        title=(
            f"Deployed, out of sample: each policy's cheapest setting that {rule} on "
            f"{span_text(tuning['start'], tuning['end'])}, "
            f"scored on {span_text(validation['start'], validation['end'])}"
        ),
        key="policy",
        headers=tuple(header for header, _ in DEPLOYED_COLUMNS),
        rows=[
            (name, [cell(row) for _, cell in DEPLOYED_COLUMNS])
            for name, row in deployed["policies"].items()
        ],
        notes=[units_note(document["settings"])],
        left=("setting",),
    )


def units_note(settings: dict[str, Any]) -> str:
    """What the cost and unserved columns count: a bare number reads as money of no unit."""
    return (
        f"cost: replica-hours x {settings['replica_hour_cost']:g} per replica-hour "
        "(--replica-hour-cost, capacity.replica_hour_cost); unserved: the fraction of the "
        f"work not served within {duration_text(settings['slo_latency_seconds'])}"
    )


def knob_text(knob: dict[str, float] | None, joiner: str = ", ") -> str:
    """A policy's setting as ``name=value`` pairs, ``-`` for none."""
    return joiner.join(f"{k}={v:g}" for k, v in (knob or {}).items()) or "-"


def missed_slo(policies: dict[str, Any], name: str) -> str:
    """Why hybrid has no saving against ``name`` on validation: the side that missed the SLO,
    and by how much (``policies`` as in the deployed section)."""
    missed = RECOMMENDED if not policies.get(RECOMMENDED, {}).get("meets_slo") else name
    if missed not in policies:  # left out by --policies, not a miss
        return f"{missed} did not run"
    return f"{missed} misses the SLO ({policies[missed]['unserved_fraction']:.2%} unserved)"


def savings_line(document: dict[str, Any]) -> str:
    """Hybrid's out-of-sample savings, or which side missed the SLO on validation."""
    deployed = document["deployed"]
    policies, savings = deployed["policies"], deployed["savings"]

    def against(key: str, name: str) -> str:
        if savings[key] is not None:
            return f"{savings[key]:+.1%} vs {name}"
        return f"none vs {name} ({missed_slo(policies, name)})"

    parts = [against(key, name) for key, name in compared(policies).items()]
    parts.append(against("oracle_gap", "oracle").replace(" vs oracle", " above the oracle"))
    return f"{RECOMMENDED} savings, deployed and out of sample: " + "; ".join(parts)


# A setting that meets the SLO on validation with less than this share of it to spare is at
# its edge: over twelve seeds of the model the viral launch's tuned hybrid left 0.074% to
# 0.118% unserved against an SLO of 0.1% (benchmarks/results/model_seed_viral_launch.md).
EDGE_SPARE = 0.1


def edge_line(document: dict[str, Any]) -> str | None:
    """The deployed settings that meet the SLO on validation with less than
    :data:`EDGE_SPARE` of it to spare; ``None`` when there are none.

    Examples
    --------
    >>> row = lambda lost: {"meets_slo": lost <= 0.001, "unserved_fraction": lost}
    >>> document = {"settings": {"slo_unserved_fraction": 0.001},
    ...             "deployed": {"policies": {"reactive": row(0.00098), "hybrid": row(0.0004)}}}
    >>> edge_line(document)[:64]
    "At the SLO's edge on validation, under 10% of it to spare: react"
    """
    slo = document["settings"]["slo_unserved_fraction"]
    edge = {
        name: row["unserved_fraction"]
        for name, row in document["deployed"]["policies"].items()
        if row["meets_slo"] and row["unserved_fraction"] > (1 - EDGE_SPARE) * slo
    }
    if not edge:
        return None
    listed = ", ".join(f"{name} {lost:.3%}" for name, lost in edge.items())
    return (
        f"At the SLO's edge on validation, under {EDGE_SPARE:.0%} of it to spare: {listed} "
        f"(SLO {slo:.3%}). Another seed of the model (--seed) or another span can tip such a "
        "setting over: a saving by or against it is not one to bank yet."
    )


# Hybrid's paths, and the setting that sizes each.
PATHS = (("reactive path", "target_utilization"), ("forecast path", "forecast_utilization"))


def headroom_line(document: dict[str, Any]) -> str | None:
    """Where hybrid's tuned setting is a rung of reach: on that traffic warm headroom, not the
    forecast, holds the SLO (``docs/which-case.md``); ``None`` elsewhere.

    Examples
    --------
    >>> settings = {"quantile": 0.5, "forecast_utilization": 1.0, "target_utilization": 0.15}
    >>> headroom_line({"deployed": {"policies": {"hybrid": {"settings": settings}}}})[:60]
    "hybrid's tuned setting is a rung of reach: its reactive path"
    """
    hybrid = document["deployed"]["policies"].get(RECOMMENDED) or {}
    settings = hybrid.get("settings") or {}
    for path, key in PATHS:
        u = settings.get(key)
        if u is not None and any(math.isclose(u, rung) for rung in reach.REACH):
            return (
                f"{RECOMMENDED}'s tuned setting is a rung of reach: its {path} at utilization "
                f"{u:g} keeps {1 / u:.3g}x what that path sizes for warm. On this traffic warm "
                "headroom, not the forecast, holds the SLO; see docs/which-case.md"
            )
    return None


def registered_line(registered: dict[str, Any]) -> str:
    """Hybrid at the registered (served) setting on the validation window, in one line."""
    settings = knob_text(registered["settings"])
    verdict = "meets" if registered["meets_slo"] else "misses"
    saving = registered["savings"]["vs_reactive"]
    versus = "" if saving is None else f"; {saving:+.1%} vs the tuned reactive HPA"
    return (
        f"served now ({registered['version']}): hybrid [{settings}] costs "
        f"{registered['cost']:,.1f} on validation, {registered['unserved_fraction']:.2e} "
        f"unserved, {verdict} the SLO{versus}"
    )


def write_report(
    result: BacktestResult, document: dict[str, Any], directory: Path, seed: int
) -> None:
    """PNG plots, the JSON and a short Markdown report in ``directory``."""
    from forecaster.backtest.plots import capacity_figure, frontier_figure

    directory.mkdir(parents=True, exist_ok=True)
    obs = result.observation
    # Each policy at its deployed setting (tuned out of sample): the runs the savings are of.
    runs = {
        name: run_policy(obs, name, chosen.params, seed)[0]
        for name, chosen in result.deployed.items()
    }
    capacity_figure(runs, obs.spec.capacity_per_replica).savefig(directory / CAPACITY_PNG, dpi=110)
    frontier_figure(result.frontier, obs.spec.slo_unserved_fraction).savefig(
        directory / FRONTIER_PNG, dpi=110
    )
    (directory / JSON_NAME).write_text(dumps(document, indent=2))
    (directory / MARKDOWN_NAME).write_text(markdown(document))


def _source(data: dict[str, Any]) -> str:
    """What was replayed: the file, or a workload of a config (the rows of its own span)."""
    if "workload" in data:
        return f"of workload `{data['workload']}` from the config `{data['path']}`"
    return f"`{data['path']}`"


def markdown(document: dict[str, Any]) -> str:
    """A short report tying the table, the plots and the JSON together."""
    data, evaluation = document["data"], document["evaluation"]
    lines = [
        "# Backtest",
        "",
        f"Data {_source(data)}: {data['rows']} rows every {data['step_seconds']} s; "
        f"evaluated {evaluation['start']} to {evaluation['end']} ({evaluation['hours']:.1f} h).",
        "",
        tables.markdown_table(policy_table(document)),
    ]
    lines += [
        "",
        tables.markdown_table(deployed_table(document)),
        "",
        savings_line(document) + ".",
        "",
        *([edge, ""] if (edge := edge_line(document)) is not None else []),
        *([headroom, ""] if (headroom := headroom_line(document)) is not None else []),
        f"![capacity]({CAPACITY_PNG})",
        "",
        f"![frontier]({FRONTIER_PNG})",
        "",
        f"Every number is in [{JSON_NAME}]({JSON_NAME}).",
        "",
    ]
    return "\n".join(lines)
