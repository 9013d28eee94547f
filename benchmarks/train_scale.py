"""How ``prewarm train``'s wall time and peak memory grow with the number of workloads, per stage.

For each N of ``--workloads``, N workloads are made from the five public traces that
``benchmarks/train_speed.py`` prepares (its last 30 days of each, on a 1-minute grid): workload
``i`` is trace ``i mod 5``, shifted in time by a random whole number of minutes (up to a day,
wrapped around), scaled by a random level factor (log-uniform in [0.2, 5]) and multiplied by
Gaussian noise (sd 5%), all from one seeded generator, so every run sees the same data.
``prewarm train`` then runs on them in its own process for each N (file source, one CSV per
workload, lightgbm, the default configuration of ``train_speed.py``, a fresh MLflow SQLite
store), with a probe that times each stage and resets the kernel's peak-RSS counter
(``/proc/self/clear_refs``) at every stage boundary, so each stage's peak resident memory is
its own. The probe wraps the pipeline's functions without changing what they do:

========  =====================================================================
stage     what it covers
========  =====================================================================
pull      reading the files (``training.pipeline.pull_workloads``)
validate  the history checks (``check_history`` / ``check_each``)
features  every feature matrix built: the fit's, the scoring's, the logged plan's
fit       the model's fit besides its features (the LightGBM boosters, calibration)
score     forecasting the gate window and the scores besides features and backtest
backtest  the gate's backtest: the simulated cluster and each policy's sweep
champion  scoring the current champion (none in a fresh store)
mlflow    logging the run and registering the version
other     the rest: start-up, config, fingerprint, MLflow store, promotion
========  =====================================================================

A nested stage's time and memory are its own, not its caller's (features inside fit count as
features): the features row's peak is the highest of its calls, the last of which runs while
MLflow logging holds its own memory. Writes ``benchmarks/results/train_scale.{md,json}``.

    python benchmarks/train_scale.py --workloads 10,100,300 [--days 30] [DATA_DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.train_speed import DAYS, config, prepare  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "train_scale"
STAGES = (
    "pull", "validate", "features", "fit", "score", "backtest", "champion", "mlflow", "other",
)  # fmt: skip
# (module, attribute, stage): the functions the probe times, looked up where they are called.
PROBES = (
    ("training.pipeline", "pull_workloads", "pull"),
    ("training.pipeline", "check_history", "validate"),
    ("training.pipeline", "check_each", "validate"),
    ("forecaster.models.quantile_gbm", "build_features", "features"),
    ("training.pipeline", "_fit", "fit"),
    ("training.pipeline", "_score", "score"),
    ("training.scoring", "observe", "backtest"),
    ("training.scoring", "sweep", "backtest"),
    ("training.pipeline", "_score_champion", "champion"),
    ("training.pipeline", "log_run", "mlflow"),
    ("training.pipeline", "log_measured", "mlflow"),
)
SEED = 15
MAX_SHIFT = 1440  # minutes: up to a day
LEVELS = (0.2, 5.0)
NOISE = 0.05
MIB = 2**20


# -- the workloads --------------------------------------------------------------------------
def workloads(base: dict[str, pd.DataFrame], n: int, days: int, out: Path) -> dict[str, str]:
    """``n`` workload files made from the base traces (see the module docs), seeded."""
    rng = np.random.default_rng(SEED)
    traces = list(base.items())
    files = {}
    for i in range(n):
        trace, frame = traces[i % len(traces)]
        frame = frame.iloc[-days * 1440 :]
        shift = int(rng.integers(0, MAX_SHIFT))
        level = float(np.exp(rng.uniform(*np.log(LEVELS))))
        noise = 1 + NOISE * rng.standard_normal(len(frame))
        values = np.roll(frame["value"].to_numpy(), shift) * level * noise
        path = out / f"{trace}-{i:04d}.csv"
        pd.DataFrame({"timestamp": frame["timestamp"], "value": np.maximum(values, 0)}).to_csv(
            path, index=False
        )
        files[path.stem] = str(path)
    return files


# -- the probe, in the training process -----------------------------------------------------
def _hwm_bytes() -> int:
    """The process's peak resident memory since the last reset."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _reset_hwm() -> None:
    # "5" resets the peak to the current resident size (Linux, proc(5)).
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


@dataclass
class StageProbe:
    """Exclusive wall time, CPU time and peak RSS of each stage (the innermost one counts)."""

    wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    peak: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))
    stack: list[str] = field(default_factory=lambda: ["other"])
    marks: tuple[float, float] = (0.0, 0.0)

    def start(self) -> None:
        self.marks = (time.perf_counter(), time.process_time())
        _reset_hwm()

    def _close_segment(self) -> None:
        """Charge the time and peak since the last boundary to the current stage."""
        stage = self.stack[-1]
        now = (time.perf_counter(), time.process_time())
        self.wall[stage] += now[0] - self.marks[0]
        self.cpu[stage] += now[1] - self.marks[1]
        self.peak[stage] = max(self.peak[stage], _hwm_bytes())
        _reset_hwm()
        self.marks = (time.perf_counter(), time.process_time())

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._close_segment()
        self.stack.append(name)
        self.calls[name] += 1
        try:
            yield
        finally:
            self._close_segment()
            self.stack.pop()

    def wrap(self, function: Callable[..., Any], name: str) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.stage(name):
                return function(*args, **kwargs)

        return timed

    def install(self) -> None:
        import importlib

        for module_name, attribute, stage in PROBES:
            module = importlib.import_module(module_name)
            setattr(module, attribute, self.wrap(getattr(module, attribute), stage))

    def finish(self) -> dict[str, Any]:
        self._close_segment()
        return {"wall_s": self.wall, "cpu_s": self.cpu, "peak_bytes": self.peak,
                "calls": self.calls}  # fmt: skip


def child(config_path: str, out_path: str) -> None:
    """The training process: ``prewarm train`` under the probe; writes the stage figures."""
    probe = StageProbe()
    probe.start()
    with probe.stage("other"):
        from prewarm.cli import cli

        probe.install()
    try:
        cli.main(
            ["train", "--config", config_path, "--no-progress", "--log-level", "WARNING"],
            prog_name="prewarm",
        )
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    else:
        code = 0
    Path(out_path).write_text(json.dumps({"exit_code": code, **probe.finish()}))


# -- the runs, from the benchmark process ---------------------------------------------------
def run(base: dict[str, pd.DataFrame], n: int, days: int) -> dict[str, Any]:
    """Train on ``n`` workloads in a fresh process and store; its stage figures and wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        files = workloads(base, n, days, out)
        path = config(files, "file", out)
        figures = out / "stages.json"
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from benchmarks.train_scale import child; "
             "child(sys.argv[1], sys.argv[2])", str(path), str(figures)],
            cwd=out, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]])},
        )  # fmt: skip
        wall = time.perf_counter() - began
        if not figures.exists():
            raise RuntimeError(f"training on {n} workloads failed:\n{done.stderr[-3000:]}")
        result = json.loads(figures.read_text())
    result.update(workloads=n, days=days, wall_time_s=wall, stdout=done.stdout.strip())
    result["peak_total_bytes"] = max(result["peak_bytes"].values())
    if result["exit_code"] not in (0, 4):
        raise RuntimeError(f"training on {n} workloads exited {result['exit_code']}:\n"
                           f"{done.stderr[-3000:]}")  # fmt: skip
    return result


def slope(runs: list[dict[str, Any]], values: list[float]) -> float:
    """Least-squares slope of ``values`` (one per run) per workload."""
    x = np.array([r["workloads"] for r in runs], dtype=float)
    return float(np.polyfit(x, values, 1)[0]) if len(runs) > 1 else float("nan")


def where(r: dict[str, Any]) -> str:
    """Where the time and the memory went in one run, largest first."""
    total = sum(r["wall_s"].values())
    time_order = sorted(STAGES, key=lambda s: -r["wall_s"][s])[:3]
    shares = ", ".join(f"{s} {r['wall_s'][s] / total:.0%}" for s in time_order)
    top = max(STAGES, key=lambda s: r["peak_bytes"][s])
    return (
        f"At N={r['workloads']:,}: the wall time goes to {shares}; the process peaks at "
        f"{r['peak_bytes'][top] / MIB:,.0f} MiB during {top}."
    )


def markdown(runs: list[dict[str, Any]], load: tuple[float, float]) -> str:
    sizes = " | ".join(f"N={r['workloads']:,}" for r in runs)
    rule = "|---" + "|---:" * (len(runs) + 1) + "|"
    lines = [
        "# Training at scale: wall time and peak memory per stage",
        "",
        f"`prewarm train` on N workloads x {runs[0]['days']} days at 1-minute steps (file "
        "source, lightgbm, default configuration), each N in its own process with a fresh "
        "MLflow store; 1-minute load average "
        f"{load[0]:.2f} before, {load[1]:.2f} after (the benchmark's own load included).",
        "",
        "| N | wall time | CPU time | peak memory | exit code |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        cpu = sum(r["cpu_s"].values())
        lines.append(
            f"| {r['workloads']:,} | {r['wall_time_s']:.1f} s | {cpu:.1f} s | "
            f"{r['peak_total_bytes'] / MIB:,.0f} MiB | {r['exit_code']} |"
        )
    lines += [
        "",
        f"Slope per workload: {slope(runs, [r['wall_time_s'] for r in runs]):.2f} s of wall time, "
        f"{slope(runs, [r['peak_total_bytes'] / MIB for r in runs]):.1f} MiB of peak memory.",
        "",
        "Wall time per stage (s), exclusive of the stages nested in it:",
        "",
        f"| | {sizes} | slope, s per workload |",
        rule,
    ]
    for stage in STAGES:
        values = [r["wall_s"][stage] for r in runs]
        cells = " | ".join(f"{v:.1f}" for v in values)
        lines.append(f"| {stage} | {cells} | {slope(runs, values):.3f} |")
    lines += [
        "",
        "Peak resident memory of the process during each stage (MiB):",
        "",
        f"| | {sizes} | slope, MiB per workload |",
        rule,
    ]
    for stage in STAGES:
        values = [r["peak_bytes"][stage] / MIB for r in runs]
        cells = " | ".join(f"{v:,.0f}" for v in values)
        lines.append(f"| {stage} | {cells} | {slope(runs, values):.2f} |")
    days = "" if runs[0]["days"] == DAYS else f" --days {runs[0]['days']}"
    lines += [
        "",
        where(runs[-1]),
        "",
        "Reproduce: `flock /tmp/prewarm-heavy.lock python benchmarks/train_scale.py "
        f"--workloads {','.join(str(r['workloads']) for r in runs)}{days} ../shared/data`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--workloads", default="10,100,300", help="comma-separated Ns")
    parser.add_argument("--days", type=int, default=DAYS, help=f"days of history, 2 to {DAYS}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results, without suffix")
    args = parser.parse_args()
    sizes = [int(n) for n in args.workloads.split(",")]
    if not 2 <= args.days <= DAYS:
        parser.error(f"--days must be 2 to {DAYS}, got {args.days}")
    with tempfile.TemporaryDirectory() as tmp:
        files = prepare(args.data_dir, Path(tmp))
        base = {name: pd.read_csv(path) for name, path in files.items()}
    load_before = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in sizes:
        runs.append(run(base, n, args.days))
        r = runs[-1]
        print(f"N={n}: {r['wall_time_s']:.1f} s, peak {r['peak_total_bytes'] / MIB:,.0f} MiB, "
              f"exit {r['exit_code']}", flush=True)  # fmt: skip
        # Written after every N: a run stopped at a large N keeps the smaller ones.
        text = markdown(runs, (load_before, os.getloadavg()[0]))
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
