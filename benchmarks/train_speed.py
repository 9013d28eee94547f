"""How long ``prewarm train`` takes on 5 workloads x 30 days at 1-minute steps.

The five demand-like public traces of ``data/`` (see its README) are cut to their last 30
days, interpolated from their own step onto a 1-minute grid, aligned to end at the same
instant, and written one file per workload. ``prewarm train`` then runs on them in a child
process (file source, fresh MLflow SQLite store in a temp dir); the wall time and the child's
peak resident memory are printed. Target on a 2-core machine: under 5 minutes.

    python benchmarks/train_speed.py [--data-dir ../shared/data] [--source file|replay]
        [--model lightgbm]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

if __name__ == "__main__" and not __package__:
    # Run as a script: make the repository root importable for `benchmarks.traces`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.traces import TRACES
from forecaster.models import DEFAULT_MODEL

DAYS = 30
STEP = 60
END = pd.Timestamp("2026-01-01", tz="UTC")


def prepare(data_dir: Path, out: Path) -> dict[str, str]:
    """One 1-minute CSV per workload, each the trace's last 30 days ending at ``END``."""
    from training.sources.file import read_series

    files = {}
    for trace in TRACES:
        name = trace.workload
        frame = read_series(data_dir / trace.file, value_col=trace.value_col)
        series = frame.set_index("timestamp")["value"].astype(float)
        series = series[series.index > series.index[-1] - pd.Timedelta(days=DAYS)]
        series.index = series.index - series.index[-1] + END  # align every trace on one end
        grid = pd.date_range(
            END - pd.Timedelta(days=DAYS) + pd.Timedelta(minutes=1), END, freq="1min"
        )
        values = series.reindex(series.index.union(grid)).interpolate("time").reindex(grid)
        values = values.bfill()
        path = out / f"{name}.csv"
        pd.DataFrame({"timestamp": grid, "value": values.to_numpy()}).to_csv(path, index=False)
        files[name] = str(path)
    return files


def config(
    files: dict[str, str],
    source: str,
    out: Path,
    model: str = DEFAULT_MODEL,
    params: dict[str, Any] | None = None,
) -> Path:
    workloads = []
    for name, path in files.items():
        p99 = float(pd.read_csv(path)["value"].quantile(0.99))
        workloads.append(
            {"name": name, "capacity": {"capacity_per_replica": p99 / 20, "cold_start": "5m",
                                        "max_replicas": 60}}
        )  # fmt: skip
    document = {
        "source": {"type": source, "files": files, "step": "1m"},
        "workloads": workloads,
        "model": {"name": model, **({"params": params} if params else {})},
        "evaluation": {"window": "1d", "train_window": "14d"},
        "mlflow": {"tracking_uri": f"sqlite:///{out / 'mlflow.db'}", "experiment": "bench"},
    }
    path = out / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    parser.add_argument("--data-dir", type=Path, default=here.parent / "shared" / "data")
    parser.add_argument("--source", choices=["file", "replay"], default="file")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="Registered forecast model.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        files = prepare(args.data_dir, out)
        path = config(files, args.source, out, args.model)
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "prewarm", "train", "--config", str(path), "--no-progress",
             "--log-level", "WARNING"],
            cwd=out, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - began
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(done.stdout.strip())
    if done.returncode not in (0, 4):
        print(done.stderr[-3000:], file=sys.stderr)
    print(f"workloads: {len(files)} x {DAYS} days at {STEP}s ({len(files) * DAYS * 1440:,} points)")
    print(f"exit code: {done.returncode}")
    print(f"wall time: {wall:.1f} s (target < 300 s)")
    print(f"peak memory of the training process: {peak_mib:.0f} MiB")
    sys.exit(0 if done.returncode in (0, 4) and wall < 300 else 1)


if __name__ == "__main__":
    main()
