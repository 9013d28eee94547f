"""The README's measured cold start and capacity report, from a seeded run on a real Prometheus.

The cluster is the integration test's (:mod:`tests.integration.measured_cluster`): three
days of two workloads, ``chat`` (capacity 5 per replica, 41 pod starts) and ``code``
(capacity 2, 26 starts), whose cold starts are ``60 s + lognormal(median 180 s, sigma
0.6)``. It is backfilled with ``promtool`` into a fresh Prometheus, and
:func:`training.measured.resolve_measured` measures it exactly as ``prewarm train`` does,
with the values a team would have typed without measuring (:data:`TYPED`) configured beside.
The same measurement is made with the demand replaced by the completions the fleet served,
to show the capped-demand check.

Run::

    .venv/bin/python benchmarks/measured_report.py [--png docs/measured-report.png]
        [--out benchmarks/results/measured_report.md]

It prints the Markdown table written to ``--out`` and writes the plot to ``--png``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

if __name__ == "__main__" and not __package__:
    # Run as a script: make the repository root importable for `benchmarks` and `tests`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.measured_cluster import (
    CAPACITY,
    STEP,
    ClusterData,
    cluster_families,
    config_document,
)
from tests.integration.prometheus import PrometheusServer, backfill, find_binaries
from training.config import parse_config
from training.measured import Measurement, resolve_measured
from training.sources import make_source

ROOT = Path(__file__).resolve().parents[1]
PNG = ROOT / "docs" / "measured-report.png"
OUT = ROOT / "benchmarks" / "results" / "measured_report.md"
# What the owners would have typed without measuring: a cold start and a capacity per
# replica each workload is configured with, and that its measurement stands beside.
TYPED = {"chat": {"cold_start": 180, "capacity": 4.0}, "code": {"cold_start": 120, "capacity": 3.0}}


def measure(url: str, root: Path, demand: str) -> dict[str, Measurement]:
    """Every workload measured with the typed values configured and ``demand`` queried."""
    document = config_document(root, url)
    for workload in document["workloads"]:
        typed = TYPED[workload["name"]]
        workload["demand"] = f'{demand}{{workload="{workload["name"]}"}}'
        workload["capacity"].update(
            cold_start=typed["cold_start"], capacity_per_replica=typed["capacity"]
        )
    config = parse_config(document)
    source = make_source(config.source.type, config.source)
    try:
        return resolve_measured(config, source)[1]
    finally:
        source.close()


def table(
    data: ClusterData, arrivals: dict[str, Measurement], completions: dict[str, Measurement]
) -> str:
    rows = [
        "| workload | starts | median | P90 measured | P90 true | max | cold start typed "
        "| capacity measured | capacity true | error | capacity typed | capped share: arrivals "
        "| capped share: completions |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, found in arrivals.items():
        cold, capacity = found.cold_start, found.capacity
        assert cold is not None and capacity is not None
        s, true = cold.summary, CAPACITY[name]
        capped = completions[name].capped
        rows.append(
            f"| {name} | {int(s['count'])} | {s['median']:.0f} s | {s['p90']:.0f} s "
            f"| {np.quantile(data.durations[name], 0.9):.0f} s | {s['max']:.0f} s "
            f"| {TYPED[name]['cold_start']} s | {capacity.per_replica:.3f} | {true:g} "
            f"| {capacity.per_replica / true - 1:+.1%} | {TYPED[name]['capacity']:g} "
            f"| {found.capped.share:.1%} (not capped) | {capped.share:.1%} "
            f"({'capped' if capped.capped else 'not capped'}) |"
        )
    return "\n".join(rows) + "\n"


def figure(data: ClusterData, found: dict[str, Measurement]) -> Any:
    """Per workload: the measured ask -> ready distribution, and the load per ready replica
    at which the queue grew, each with the estimate, the true value and the typed one."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 6.4), layout="constrained")
    axes = figure.subplots(len(found), 2)
    for (left, right), (name, measured) in zip(axes, found.items(), strict=True):
        cold, capacity = measured.cold_start, measured.capacity
        assert cold is not None and capacity is not None
        left.hist(cold.durations, bins=15, color="0.65")
        left.axvline(cold.seconds, color="C1", label=f"measured P90: {cold.seconds:.0f} s")
        true_p90 = np.quantile(data.durations[name], 0.9)
        left.axvline(true_p90, color="k", ls=":", label=f"true P90: {true_p90:.0f} s")
        typed = TYPED[name]["cold_start"]
        left.axvline(typed, color="C3", ls="--", label=f"typed: {typed} s")
        left.set_title(f"{name}: {len(cold.durations)} pods, created -> ready")
        left.set_xlabel("seconds")
        left.legend(fontsize="small")
        series = data.series[name]
        load = series["demand"][:-1] / series["ready"][:-1]
        grew = np.diff(series["queue"]) > 0
        edges = np.linspace(0, np.quantile(load, 0.99), 40)
        right.hist([load[~grew], load[grew]], bins=edges, stacked=True, color=["0.75", "C0"],
                   label=["queue flat", "queue grew"])  # fmt: skip
        right.axvline(capacity.per_replica, color="C1",
                      label=f"measured: {capacity.per_replica:.2f}")  # fmt: skip
        right.axvline(CAPACITY[name], color="k", ls=":", label=f"true: {CAPACITY[name]:g}")
        right.axvline(TYPED[name]["capacity"], color="C3", ls="--",
                      label=f"typed: {TYPED[name]['capacity']:g}")  # fmt: skip
        right.set_title(f"{name}: demand per ready replica, {STEP} s steps")
        right.set_xlabel("demand per ready replica (requests/s)")
        right.legend(fontsize="small")
    return figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", type=Path, default=PNG)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("needs `prometheus` and `promtool` on PATH (Debian package prometheus)")
    data = cluster_families()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        backfill(binaries, data.families, root / "data")
        with PrometheusServer(binaries, root / "data").start() as server:
            arrivals = measure(server.url, root, "demand")
            completions = measure(server.url, root, "completed")
    text = table(data, arrivals, completions)
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        "# Measured cold start and capacity (`benchmarks/measured_report.py`)\n\n" + text
    )
    args.png.parent.mkdir(parents=True, exist_ok=True)
    figure(data, arrivals).savefig(args.png, dpi=110)
    print(f"plot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
