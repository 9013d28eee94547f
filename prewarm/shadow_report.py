"""Writes a shadow report: JSON, Markdown, one PNG plot and one CSV of series per workload.

The JSON document::

    {"model": "prewarm-forecaster v3",
     "period": {"start": ISO, "end": ISO, "hours": float, "step_seconds": int},
     "workloads": {NAME: {
         "actual": {"source": "measured" | "simulated reactive HPA", "replica_hours", "cost",
                    "unserved_fraction", "unserved_work", "slo_violation_minutes",
                    "cold_starts", "scale_events", "mean_utilization", "meets_slo"},
         "prewarm": {the same for the hybrid fleet, "source": "hybrid"},
         "saved_replica_hours", "saved_cost",        # actual minus prewarm
         "unserved_fraction": {"actual", "prewarm"},
         "added_hours", "idle_hours",                # see forecaster.backtest.shadow
         "asks_source": "recorded" | "replayed",    # the asks the hybrid fleet read
         "asks_coverage",                            # share of the steps recorded
         "quantile", "horizon_seconds", "coverage", "pinball", "notes": [...]}},
     "total": {"actual": {...}, "prewarm": {...}, "saved_replica_hours", "saved_cost",
               "unserved_fraction": {...}, "added_hours", "idle_hours"}}

``series/NAME.csv`` holds, per simulation step, the demand, the actual fleet's billed and
ready replicas, prewarm's ask, the hybrid fleet's billed and ready replicas and the work
each fleet left unserved: everything the plot draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from prewarm import tables
from prewarm.options import console
from prewarm.spans import span_text
from training import documents

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from forecaster.backtest.metrics import Metrics
    from forecaster.backtest.simulator import Trajectory
    from prewarm.shadow import Period, WorkloadShadow

JSON_NAME, MARKDOWN_NAME = "shadow.json", "shadow.md"
SIMULATED = "simulated reactive HPA"


def _fleet(metrics: Metrics, run: Trajectory, source: str, slo: float) -> dict[str, Any]:
    return {
        "source": source,
        **metrics.to_dict(),
        "unserved_work": float(run.unserved.sum()),
        "meets_slo": metrics.unserved_fraction <= slo,
    }


def _workload(shadow: WorkloadShadow, slo: float) -> dict[str, Any]:
    result, accuracy = shadow.result, shadow.accuracy
    actual = _fleet(result.actual_metrics, result.actual,
                    "measured" if result.measured else SIMULATED, slo)  # fmt: skip
    prewarm = _fleet(result.prewarm_metrics, result.prewarm, "hybrid", slo)
    return {
        "actual": actual,
        "prewarm": prewarm,
        **_differences(actual, prewarm),
        "added_hours": result.added_hours,
        "idle_hours": result.idle_hours,
        "asks_source": result.asks_source,
        "asks_coverage": result.asks_coverage,
        "quantile": accuracy.quantile,
        "horizon_seconds": accuracy.horizon_seconds,
        "coverage": accuracy.coverage,
        "pinball": accuracy.pinball,
        "notes": list(shadow.notes),
    }


def _differences(actual: Mapping[str, Any], prewarm: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "saved_replica_hours": actual["replica_hours"] - prewarm["replica_hours"],
        "saved_cost": actual["cost"] - prewarm["cost"],
        "unserved_fraction": {
            "actual": actual["unserved_fraction"],
            "prewarm": prewarm["unserved_fraction"],
        },
    }


def _total(shadows: Mapping[str, WorkloadShadow], workloads: Mapping[str, Any]) -> dict[str, Any]:
    arrived = sum(float(s.result.actual.arrivals.sum()) for s in shadows.values())
    fleets = {}
    for side in ("actual", "prewarm"):
        unserved = sum(w[side]["unserved_work"] for w in workloads.values())
        fleets[side] = {
            "replica_hours": sum(w[side]["replica_hours"] for w in workloads.values()),
            "cost": sum(w[side]["cost"] for w in workloads.values()),
            "unserved_work": unserved,
            "unserved_fraction": unserved / arrived if arrived > 0 else 0.0,
        }
    return {
        **fleets,
        **_differences(fleets["actual"], fleets["prewarm"]),
        "added_hours": sum(w["added_hours"] for w in workloads.values()),
        "idle_hours": sum(w["idle_hours"] for w in workloads.values()),
    }


def to_json(shadows: Mapping[str, WorkloadShadow], period: Period, model: str) -> dict[str, Any]:
    """The JSON document of the module docstring."""
    workloads = {
        name: _workload(shadow, shadow.spec.slo_unserved_fraction)
        for name, shadow in shadows.items()
    }
    return {
        "model": model,
        "period": {
            "start": period.start.isoformat(),
            "end": period.end.isoformat(),
            "hours": period.cells * period.step / 3600.0,
            "step_seconds": period.step,
        },
        "workloads": workloads,
        "total": _total(shadows, workloads),
    }


# Table columns: header, the value as text from a workload's (or the total's) entry.
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("asks", lambda row: row.get("asks_source", "-")),
    ("actual\nreplica h", lambda row: f"{row['actual']['replica_hours']:,.1f}"),
    ("prewarm\nreplica h", lambda row: f"{row['prewarm']['replica_hours']:,.1f}"),
    ("saved\ncost", lambda row: f"{row['saved_cost']:+,.1f}"),
    ("actual\nunserved", lambda row: f"{row['actual']['unserved_fraction']:.2e}"),
    ("prewarm\nunserved", lambda row: f"{row['prewarm']['unserved_fraction']:.2e}"),
    ("added\nh", lambda row: f"{row['added_hours']:.2f}"),
    ("idle\nh", lambda row: f"{row['idle_hours']:.2f}"),
    ("coverage", lambda row: _maybe(row.get("coverage"), "{:.3f}")),
    ("pinball", lambda row: _maybe(row.get("pinball"), "{:.3g}")),
)


def _maybe(value: float | None, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def table(document: Mapping[str, Any]) -> tables.TableSpec:
    """One row per workload and the total; notes say where the actual fleet is simulated."""
    period = document["period"]
    rows = [
        (name, [cell(row) for _, cell in COLUMNS]) for name, row in document["workloads"].items()
    ]
    rows.append(("total", [cell(document["total"]) for _, cell in COLUMNS]))
    notes = [
        f"{name}: {note}" for name, row in document["workloads"].items() for note in row["notes"]
    ]
    return tables.TableSpec(
        title=f"Shadow replay of {document['model']}, {span_text(period['start'], period['end'])}",
        key="workload",
        headers=tuple(header for header, _ in COLUMNS),
        rows=rows,
        notes=notes,
        left=("asks",),
    )


def figure(shadow: WorkloadShadow) -> Figure:
    """Demand, the actual fleet's ready capacity, prewarm's asks and the hybrid fleet's ready
    capacity over the period, with each fleet's unserved work marked."""
    from matplotlib.figure import Figure

    result, c = shadow.result, shadow.spec.capacity_per_replica
    run = result.actual
    hours = np.arange(len(run.arrivals)) * run.step_seconds / 3600.0
    demand = run.arrivals / run.step_seconds
    plot = Figure(figsize=(11, 3.6), layout="constrained")
    axis = plot.subplots()
    axis.fill_between(hours, demand, step="post", color="0.8", label="demand")
    actual = "actual" if result.measured else SIMULATED
    axis.step(hours, run.ready * c, where="post", color="C1", label=f"{actual}: ready capacity")
    axis.step(hours, result.asks * c, where="post", color="C2", linestyle=":", label="prewarm asks")
    axis.step(hours, result.prewarm.ready * c, where="post", color="C0",
              label="hybrid: ready capacity")  # fmt: skip
    for trajectory, color, label in ((run, "C3", actual), (result.prewarm, "C4", "hybrid")):
        lost = trajectory.unserved > 0
        axis.plot(hours[lost], demand[lost], "x", color=color, markersize=3,
                  label=f"{label}: unserved")  # fmt: skip
    axis.set_xlabel("hours from the period's start")
    axis.set_ylabel("demand / capacity per second")
    axis.legend(loc="upper left", fontsize="small", ncols=3)
    axis.set_title(f"{shadow.name}: demand and capacity, actual and with prewarm")
    return plot


def series_frame(shadow: WorkloadShadow) -> pd.DataFrame:
    """What the plot draws, per simulation step."""
    result = shadow.result
    actual, hybrid = result.actual, result.prewarm
    return pd.DataFrame({
        "seconds": np.arange(len(actual.arrivals)) * actual.step_seconds,
        "demand": actual.arrivals / actual.step_seconds,
        "actual_replicas": actual.asked,
        "actual_ready": actual.ready,
        "actual_unserved": actual.unserved,
        "prewarm_asks": result.asks,
        "hybrid_replicas": hybrid.asked,
        "hybrid_ready": hybrid.ready,
        "hybrid_unserved": hybrid.unserved,
    })  # fmt: skip


def write(
    shadows: Mapping[str, WorkloadShadow],
    document: Mapping[str, Any],
    directory: Path,
    json_path: Path | None = None,
) -> None:
    """The JSON, the Markdown, ``NAME.png`` and ``series/NAME.csv`` in ``directory``."""
    (directory / "series").mkdir(parents=True, exist_ok=True)
    for name, shadow in shadows.items():
        figure(shadow).savefig(directory / f"{name}.png", dpi=100)
        series_frame(shadow).to_csv(directory / "series" / f"{name}.csv", index=False)
    text = documents.dumps(document, indent=2)
    (directory / JSON_NAME).write_text(text)
    if json_path is not None:
        json_path.write_text(text)
    (directory / MARKDOWN_NAME).write_text(markdown(document))


def markdown(document: Mapping[str, Any]) -> str:
    """The table, what its columns mean, and the plots."""
    lines = [
        "# Shadow report",
        "",
        tables.markdown_table(table(document)),
        "",
        "*actual*: what the cluster ran (its measured replicas, unserved work estimated from "
        "the demand against the ready ones); a workload without a `replicas` query is the "
        f"{SIMULATED} at its registered settings instead. *asks*: where prewarm's asks come "
        "from, *recorded* by `serve --shadow` (used when they cover 95% of the period) or "
        "*replayed* from the champion. *prewarm*: the hybrid fleet, the HPA reading prewarm's "
        "asks beside its own metrics: max(the HPA model on the asks, the actual replicas), "
        "with the cold start. *added h*: hours the "
        "actual fleet dropped work while the hybrid fleet had more replicas ready. *idle h*: "
        "hours prewarm asked for fewer replicas than ran, enough for the demand, while nothing "
        "was dropped (the hybrid fleet keeps them: room, not a saving counted above). "
        "*coverage* and *pinball* are of the workload's quantile at its lead horizon.",
        "",
    ]
    for name in document["workloads"]:
        lines += [f"![{name}]({name}.png)", ""]
    lines += [f"Every number is in [{JSON_NAME}]({JSON_NAME}); the series in `series/`.", ""]
    return "\n".join(lines)


def print_summary(document: Mapping[str, Any], directory: Path) -> None:
    """The table on stdout and where the report is."""
    out = console()
    tables.print_table(out, table(document))
    out.print(f"report: {directory / MARKDOWN_NAME}", markup=False, highlight=False)
