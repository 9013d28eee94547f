"""The shadow report of the README, from a real run: two real traces in a real Prometheus.

Two workloads are made from traces of the data folder: ``google-cpu``
(``google_cluster_cpu_5min``) and ``azure-vm`` (``azure_vm_cpu_5min_relative``, column
``cpu_usage``), their last ten days, scaled so the 99th percentile needs 20 replicas, moved
onto a grid ending at 2026-01-01T00:00Z. There is no real cluster here, so the "actual"
replicas are the project's own reactive HPA (the backtest's ``reactive`` policy at the
config's settings) run on each demand through the simulator, recorded every 15 s as
kube-state-metrics' ``kube_deployment_status_replicas`` (and ``..._available``) scraped at
that interval would record them.
All of it is backfilled with ``promtool`` into a fresh Prometheus
(:mod:`tests.integration.prometheus`), a champion is trained on the eight days before the
last two, and ``prewarm shadow-report --since 2d`` replays it over those two days.

Run::

    .venv/bin/python benchmarks/shadow_example.py [--data DIR] [--png docs/shadow-report.png]

It prints the report's table (as ``prewarm shadow-report`` does) and writes the plot of
``google-cpu`` to ``--png``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

if __name__ == "__main__" and not __package__:
    # Run as a script: make the repository root importable for `benchmarks` and `tests`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from click.testing import CliRunner

from forecaster.backtest.shadow import recorded_replicas, sim_step_for
from forecaster.frame import infer_step, regularize
from prewarm.cli import cli
from tests.integration.prometheus import Gauge, PrometheusServer, backfill, find_binaries
from training.config import load_config, parse_config
from training.pipeline import run_training
from training.sources.file import read_series

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
PNG = Path(__file__).resolve().parents[1] / "docs" / "shadow-report.png"
STEP = 300
SIM = sim_step_for(STEP)  # the replicas' recording interval: the simulation step
END = 1_767_225_600  # 2026-01-01T00:00:00Z
DAYS, SHADOW_DAYS = 10, 2
CELLS = DAYS * 86400 // STEP
START = END - CELLS * STEP
# workload -> (file, value column)
TRACES = {
    "google-cpu": ("google_cluster_cpu_5min.csv", None),
    "azure-vm": ("azure_vm_cpu_5min_relative.csv", "cpu_usage"),
}
PLOTTED = "google-cpu"
REPLICAS_AT_P99 = 20


def demand(data: Path, file: str, column: str | None) -> np.ndarray:
    """The trace's last ``DAYS`` days as a rate (``value``), rounded as the gauge stores it."""
    frame = read_series(data / file, value_col=column)
    frame = regularize(frame, infer_step(frame))
    if infer_step(frame) != STEP:
        raise SystemExit(f"{file}: expected a {STEP}s grid, got {infer_step(frame)}s")
    values = frame["value"].interpolate(limit_direction="both").to_numpy(dtype=float)[-CELLS:]
    return np.round(values, 6)


def config_document(root: Path, url: str, capacity: dict[str, float]) -> dict[str, Any]:
    workloads = [
        {"name": name, "demand": f'demand{{workload="{name}"}}',
         "replicas": f'kube_deployment_status_replicas{{deployment="{name}"}}',
         "ready_replicas": f'kube_deployment_status_replicas_available{{deployment="{name}"}}',
         "capacity": {"capacity_per_replica": capacity[name], "cold_start": "5m",
                      "max_replicas": 4 * REPLICAS_AT_P99, "slo_unserved_fraction": 0.01}}
        for name in TRACES
    ]  # fmt: skip
    return {
        "source": {"type": "prometheus", "url": url, "step": "5m", "retries": 0,
                   "lookback": f"{DAYS - SHADOW_DAYS}d", "end": "2025-12-30T00:00:00Z"},
        "workloads": workloads,
        "model": {"features": {"seasonal_lags": ["1d"]}},
        "evaluation": {"window": "1d", "train_window": "4d"},
        "validation": {"min_history": "2d"},
        # 5-minute data: a serve of this config must accept points up to one step old
        "serving": {"max_staleness": "10m"},
        "mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}",
                   "registered_model": "shadow-example"},
    }  # fmt: skip


def points(values: np.ndarray, step: float = STEP) -> list[tuple[float, float]]:
    return [(float(START + i * step), float(v)) for i, v in enumerate(values)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    parser.add_argument("--png", type=Path, default=PNG, help=f"where {PLOTTED}'s plot goes")
    args = parser.parse_args(argv)
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("needs `prometheus` and `promtool` on PATH (Debian package prometheus)")
    series = {name: demand(args.data, file, column) for name, (file, column) in TRACES.items()}
    capacity = {
        name: float(np.quantile(values, 0.99)) / REPLICAS_AT_P99 for name, values in series.items()
    }
    with tempfile.TemporaryDirectory(prefix="shadow-example-") as tmp:
        root = Path(tmp)
        document = config_document(root, "http://unused", capacity)
        policies = parse_config(document).policies
        fleets = {
            name: recorded_replicas(values, STEP, policies[name]) for name, values in series.items()
        }
        families = [
            Gauge("demand", [({"workload": n}, points(v)) for n, v in series.items()]),
            Gauge("kube_deployment_status_replicas",
                  [({"deployment": n}, points(f[0], SIM)) for n, f in fleets.items()]),
            Gauge("kube_deployment_status_replicas_available",
                  [({"deployment": n}, points(f[1], SIM)) for n, f in fleets.items()]),
        ]  # fmt: skip
        backfill(binaries, families, root / "data")
        with PrometheusServer(binaries, root / "data").start() as server:
            config = root / "prewarm.yaml"
            config.write_text(yaml.safe_dump(config_document(root, server.url, capacity)))
            uri = f"sqlite:///{root / 'mlflow.db'}"
            trained = run_training(load_config(config), tracking_uri=uri)
            if trained.version is None:
                raise SystemExit(f"training registered no champion: {trained.message}")
            out = root / "report"
            outcome = CliRunner().invoke(
                cli,
                ["shadow-report", "--config", str(config), "--since", f"{SHADOW_DAYS}d",
                 "--until", "2026-01-01T00:00:00Z", "--out", str(out), "--tracking-uri", uri],
            )  # fmt: skip
        print(outcome.output, end="")
        if outcome.exit_code != 0:
            return int(outcome.exit_code)
        args.png.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / f"{PLOTTED}.png", args.png)
        print(f"plot: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
