"""How ``prewarm train``'s wall time and peak memory grow with the number of workloads, per stage.

For each N of ``--workloads``, N workloads are made from the five public traces that
``benchmarks/train_speed.py`` prepares (its last 30 days of each, on a 1-minute grid): workload
``i`` is trace ``i mod 5``, shifted in time by a random whole number of minutes (up to a day,
wrapped around), scaled by a random level factor (log-uniform in [0.2, 5]) and multiplied by
Gaussian noise (sd 5%), all from one seeded generator, so every run sees the same data.
``prewarm train`` then runs on them in its own process for each N (file source, one CSV per
workload, ``--model``, by default the package's, in the configuration of ``train_speed.py``, a
fresh MLflow SQLite store), with a probe that times each stage and resets the kernel's
peak-RSS counter (``/proc/self/clear_refs``) at every stage boundary, so each stage's peak
resident memory is its own. The probe wraps the pipeline's functions without changing what they do:

========  =====================================================================
stage     what it covers
========  =====================================================================
pull      reading the files (``training.pipeline.pull_workloads``)
validate  the history checks (``check_history`` / ``check_each``)
tune      with ``--tune``: each workload's backtest, whose policy is registered
          (``prewarm.config_backtest.backtest_workloads``)
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

    python benchmarks/train_scale.py --workloads 10,100,300 [--days 30] [--tune]
        [--tune-limit K] [DATA_DIR]

``--tune`` trains as the nightly CronJob does (``prewarm train --tune``): each workload is
backtested first, on worker processes as the gate's sweeps are. ``--tune-limit K`` (with
``--tune``) backtests at most K of them, as ``prewarm train --tune-limit`` does; the store is
fresh, so the run tunes K new workloads and registers the others with the config's settings.

With ``--dask-workers K``, the largest N is also trained with ``--dask-scheduler`` on a fresh
``distributed.LocalCluster`` of K worker processes, and the two runs are compared.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
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
from forecaster.models import DEFAULT_MODEL  # noqa: E402
from training.compute import usable_cpus  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "train_scale"
STAGES = (
    "pull", "validate", "tune", "features", "fit", "score", "backtest", "champion", "mlflow",
    "other",
)  # fmt: skip
# (module, attribute, stage): the functions the probe times, looked up where they are called.
PROBES = (
    ("training.pipeline", "pull_workloads", "pull"),
    ("training.pipeline", "check_history", "validate"),
    ("training.pipeline", "check_each", "validate"),
    ("prewarm.config_backtest", "backtest_workloads", "tune"),
    ("forecaster.models.quantile_gbm", "build_features", "features"),
    ("training.pipeline", "_fit", "fit"),
    ("training.pipeline", "_score", "score"),
    ("training.scoring", "observe", "backtest"),
    # The sweeps run inside map_calls: here, or on the Dask workers while this process waits.
    ("training.scoring", "map_calls", "backtest"),
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

        @functools.wraps(function)
        def timed_iteration(*args: Any, **kwargs: Any) -> Iterator[Any]:
            # A generator does its work as it is consumed: the stage spans the iteration.
            with self.stage(name):
                yield from function(*args, **kwargs)

        return timed_iteration if inspect.isgeneratorfunction(function) else timed

    def install(self) -> None:
        import importlib

        for module_name, attribute, stage in PROBES:
            module = importlib.import_module(module_name)
            setattr(module, attribute, self.wrap(getattr(module, attribute), stage))

    def finish(self) -> dict[str, Any]:
        self._close_segment()
        return {"wall_s": self.wall, "cpu_s": self.cpu, "peak_bytes": self.peak,
                "calls": self.calls}  # fmt: skip


class WorkerWatch:
    """The peak resident memory of each local worker process of this one (a
    ``multiprocessing`` spawn child: the gate's sweeps on one per usable CPU), and the most
    this process and its workers held at once, read from ``/proc`` every ``interval`` s while
    they run: a worker's own figures die with it, and the kernel's peak of a process's
    children counts what a forked child shares with its parent (3 GiB for a ``git`` call)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.together = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.interval):
            held = _status(me).get("VmRSS", 0)
            for pid in _workers(me):
                status = _status(pid)
                self.peaks[pid] = max(self.peaks.get(pid, 0), status.get("VmHWM", 0))
                held += status.get("VmRSS", 0)
            self.together = max(self.together, held)


def _workers(parent: int) -> list[int]:
    """This process's spawned multiprocessing children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == parent and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def _status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in bytes (empty once it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {
        key: int(line.split()[1]) * 1024
        for line in lines
        for key in ("VmRSS", "VmHWM")
        if line.startswith(key + ":")
    }


def child(config_path: str, out_path: str, scheduler: str = "", tune: str = "") -> None:
    """The training process: ``prewarm train`` under the probe; writes the stage figures.
    ``tune``: the tuning options, space-separated (``--tune --tune-limit 5``)."""
    probe = StageProbe()
    watch = WorkerWatch()
    watch.start()
    probe.start()
    with probe.stage("other"):
        from prewarm.cli import cli

        probe.install()
    distributed = ["--dask-scheduler", scheduler] if scheduler else []
    tuned = tune.split()
    try:
        cli.main(
            ["train", "--config", config_path, "--no-progress", "--log-level", "WARNING",
             *distributed, *tuned],
            prog_name="prewarm",
        )  # fmt: skip
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    else:
        code = 0
    watch.stop()
    workers = {"local_worker_peak_bytes": sorted(watch.peaks.values()),
               "with_workers_peak_bytes": watch.together}  # fmt: skip
    Path(out_path).write_text(json.dumps({"exit_code": code, **probe.finish(), **workers}))


# -- the runs, from the benchmark process ---------------------------------------------------
def _configuration(run: dict[str, Any]) -> str:
    """How the run's configuration differs from the default one, for the report."""
    jobs = run.get("fit_jobs")
    if jobs:
        return f"default configuration but `n_jobs: {jobs}`"
    return f"default configuration: the fit on the {usable_cpus()} CPUs the job may use"


def run(
    base: dict[str, pd.DataFrame],
    n: int,
    days: int,
    dask_workers: int = 0,
    model: str = DEFAULT_MODEL,
    fit_jobs: int | None = None,
    tune: bool = False,
    tune_limit: int | None = None,
) -> dict[str, Any]:
    """Train on ``n`` workloads in a fresh process and store; its stage figures and wall time.
    ``tune``: ``prewarm train --tune``, with ``--tune-limit tune_limit`` when given.

    With ``dask_workers``, on a new ``LocalCluster`` of that many worker processes (one
    thread each), whose workers' peak memory is reported beside the training process's.
    """
    with tempfile.TemporaryDirectory() as tmp, _cluster(dask_workers) as cluster:
        out = Path(tmp)
        files = workloads(base, n, days, out)
        path = config(files, "file", out, model, {"n_jobs": fit_jobs} if fit_jobs else None)
        figures = out / "stages.json"
        scheduler = cluster.scheduler_address if cluster is not None else ""
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from benchmarks.train_scale import child; "
             "child(*sys.argv[1:])", str(path), str(figures), scheduler,
             " ".join(tuning_options(tune, tune_limit))],
            cwd=out, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]])},
        )  # fmt: skip
        wall = time.perf_counter() - began
        if not figures.exists():
            raise RuntimeError(f"training on {n} workloads failed:\n{done.stderr[-3000:]}")
        result = json.loads(figures.read_text())
        result["worker_peak_bytes"] = (
            _worker_peaks(cluster) if cluster is not None else result["local_worker_peak_bytes"]
        )
    result.update(
        workloads=n, days=days, dask_workers=dask_workers, wall_time_s=wall, model=model,
        fit_jobs=fit_jobs, tune=tune, tune_limit=tune_limit, stdout=done.stdout.strip(),
    )  # fmt: skip
    result["peak_total_bytes"] = max(result["peak_bytes"].values())
    if result["exit_code"] not in (0, 4):
        raise RuntimeError(f"training on {n} workloads exited {result['exit_code']}:\n"
                           f"{done.stderr[-3000:]}")  # fmt: skip
    return result


def tuning_options(tune: bool | None, limit: int | None) -> list[str]:
    """``prewarm train``'s tuning options as a run used them.

    >>> tuning_options(True, 5), tuning_options(True, None), tuning_options(False, None)
    (['--tune', '--tune-limit', '5'], ['--tune'], [])
    """
    return [*(["--tune"] if tune else []), *(["--tune-limit", str(limit)] if limit else [])]


@contextmanager
def _cluster(workers: int) -> Iterator[Any]:
    """A fresh ``LocalCluster`` of ``workers`` processes, or None for 0."""
    if not workers:
        yield None
        return
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        yield cluster


def _worker_peaks(cluster: Any) -> list[int]:
    """Each worker process's peak resident memory (none without a cluster)."""
    if cluster is None:
        return []
    from distributed import Client

    with Client(cluster) as client:
        return sorted(client.run(_hwm_bytes).values())


def slope(runs: list[dict[str, Any]], values: list[float], digits: int) -> str:
    """Least-squares slope of ``values`` (one per run) per workload, to ``digits`` decimals;
    ``-`` under two runs, which have no slope."""
    if len(runs) < 2:
        return "-"
    x = np.array([r["workloads"] for r in runs], dtype=float)
    return f"{float(np.polyfit(x, values, 1)[0]):.{digits}f}"


def label(r: dict[str, Any]) -> str:
    return f"N={r['workloads']:,}" + (", Dask" if r["dask_workers"] else "")


def where(r: dict[str, Any]) -> str:
    """Where the time and the memory went in one run, largest first."""
    total = sum(r["wall_s"].values())
    time_order = sorted(STAGES, key=lambda s: -r["wall_s"][s])[:3]
    shares = ", ".join(f"{s} {r['wall_s'][s] / total:.0%}" for s in time_order)
    top = max(STAGES, key=lambda s: r["peak_bytes"][s])
    return (
        f"At {label(r)}: the wall time goes to {shares}; the process peaks at "
        f"{r['peak_bytes'][top] / MIB:,.0f} MiB during {top}."
    )


def versus(runs: list[dict[str, Any]]) -> list[str]:
    """Each Dask run against the local run of the same N."""
    local = {r["workloads"]: r for r in runs if not r["dask_workers"]}
    lines = []
    for r in runs:
        mine = local.get(r["workloads"])
        if not r["dask_workers"] or mine is None:
            continue
        workers = ", ".join(f"{b / MIB:,.0f}" for b in r["worker_peak_bytes"])
        lines.append(
            f"At N={r['workloads']:,}, on a LocalCluster of {r['dask_workers']} worker "
            f"processes on the same machine: {r['wall_time_s'] / mine['wall_time_s']:.2f}x "
            f"the local wall time ({r['wall_time_s']:.1f} s against {mine['wall_time_s']:.1f} "
            f"s); the gate's backtest {r['wall_s']['backtest']:.1f} s against "
            f"{mine['wall_s']['backtest']:.1f} s "
            f"({r['wall_s']['backtest'] / mine['wall_s']['backtest']:.2f}x); the training "
            f"process's peak {r['peak_total_bytes'] / mine['peak_total_bytes']:.2f}x the local "
            f"one, each worker's {workers} MiB."
        )
    if lines:
        lines.append(
            f"The workers and the training process share this machine's {os.cpu_count()} "
            "cores. A one-process run sweeps on one core while the others wait; the "
            "cluster's workers sweep on all of them, so the backtest's ratio measures this "
            "machine's idle cores, not what more machines would give. The other stages stay "
            "in the training process, and compete with the cluster's processes for the cores."
        )
    return lines


def markdown(runs: list[dict[str, Any]], load: tuple[float, float]) -> str:
    tuning = tuning_options(runs[0].get("tune"), runs[0].get("tune_limit"))
    sizes = " | ".join(label(r) for r in runs)
    rule = "|---" + "|---:" * (len(runs) + 1) + "|"
    local = [r for r in runs if not r["dask_workers"]]
    lines = [
        "# Training at scale: wall time and peak memory per stage",
        "",
        f"`{' '.join(['prewarm train', *tuning])}` on N workloads x "
        f"{runs[0]['days']} days at 1-minute steps (file "
        f"source, model `{runs[0]['model']}`, {_configuration(runs[0])}), each N "
        "in its own process with a fresh MLflow store; 1-minute load average "
        f"{load[0]:.2f} before, {load[1]:.2f} after (the benchmark's own load included). "
        "A Dask run passes `--dask-scheduler` to a fresh LocalCluster: the gate's policy "
        "sweeps run on its workers, whose CPU time is not in the CPU column.",
        "",
        "| N | where | wall time | CPU time | peak memory | workers' peak | exit code |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        cpu = sum(r["cpu_s"].values())
        place = (
            f"LocalCluster, {r['dask_workers']} workers"
            if r["dask_workers"]
            else f"one process and {len(r['worker_peak_bytes'])} local workers (together at "
            f"most {r['with_workers_peak_bytes'] / MIB:,.0f} MiB)"
            if r["worker_peak_bytes"]
            else "one process"
        )
        peaks = ", ".join(f"{b / MIB:,.0f}" for b in r["worker_peak_bytes"])
        workers = f"{peaks} MiB" if peaks else "-"
        lines.append(
            f"| {r['workloads']:,} | {place} | {r['wall_time_s']:.1f} s | {cpu:.1f} s | "
            f"{r['peak_total_bytes'] / MIB:,.0f} MiB | {workers} | {r['exit_code']} |"
        )
    if len(local) > 1:
        lines += [
            "",
            f"Slope per workload (one-process runs): "
            f"{slope(local, [r['wall_time_s'] for r in local], 2)} s of wall time, "
            f"{slope(local, [r['peak_total_bytes'] / MIB for r in local], 1)} MiB of peak "
            "memory.",
        ]
    lines += [
        *(["", *versus(runs)] if versus(runs) else []),
        "",
        "Wall time per stage (s), exclusive of the stages nested in it:",
        "",
        f"| | {sizes} | slope, s per workload |",
        rule,
    ]
    for stage in STAGES:
        values = [r["wall_s"][stage] for r in runs]
        cells = " | ".join(f"{v:.1f}" for v in values)
        lines.append(
            f"| {stage} | {cells} | {slope(local, [r['wall_s'][stage] for r in local], 3)} |"
        )
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
        own = [r["peak_bytes"][stage] / MIB for r in local]
        lines.append(f"| {stage} | {cells} | {slope(local, own, 2)} |")
    days = "" if runs[0]["days"] == DAYS else f" --days {runs[0]['days']}"
    workers = max(r["dask_workers"] for r in runs)
    dask = f" --dask-workers {workers}" if workers else ""
    model = "" if runs[0]["model"] == DEFAULT_MODEL else f" --model {runs[0]['model']}"
    model += f" --fit-jobs {runs[0]['fit_jobs']}" if runs[0].get("fit_jobs") else ""
    model += "".join(f" {option}" for option in tuning)
    sizes_run = ",".join(str(r["workloads"]) for r in local or runs)
    lines += [
        "",
        where(local[-1] if local else runs[-1]),
        "",
        "Reproduce: `flock /tmp/prewarm-heavy.lock python benchmarks/train_scale.py "
        f"--workloads {sizes_run}{days}{dask}{model} ../shared/data`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--workloads", default="10,100,300", help="comma-separated Ns")
    parser.add_argument("--days", type=int, default=DAYS, help=f"days of history, 2 to {DAYS}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results, without suffix")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="Registered forecast model.")
    parser.add_argument(
        "--fit-jobs",
        type=int,
        default=None,
        help="the model's n_jobs in the config (default: unset, so the fit takes the CPUs "
        "the training process may use)",
    )
    parser.add_argument(
        "--tune",
        action="store_true",
        help="train as the nightly CronJob does, with --tune: each workload backtested first",
    )
    parser.add_argument(
        "--tune-limit",
        type=int,
        default=None,
        help="with --tune: backtest at most this many workloads (prewarm train --tune-limit)",
    )
    parser.add_argument(
        "--dask-workers",
        type=int,
        default=0,
        help="also train the largest N with --dask-scheduler on a LocalCluster of this many "
        "workers",
    )
    args = parser.parse_args()
    if args.tune_limit is not None and (args.tune_limit < 1 or not args.tune):
        parser.error(f"--tune-limit must be 1 or more, with --tune; got {args.tune_limit}")
    sizes = [int(n) for n in args.workloads.split(",")]
    if not 2 <= args.days <= DAYS:
        parser.error(f"--days must be 2 to {DAYS}, got {args.days}")
    if args.fit_jobs is not None and args.fit_jobs < 1:
        parser.error(f"--fit-jobs must be 1 or more, got {args.fit_jobs}")
    if args.dask_workers < 0:
        parser.error(f"--dask-workers must be 0 or more, got {args.dask_workers}")
    with tempfile.TemporaryDirectory() as tmp:
        files = prepare(args.data_dir, Path(tmp))
        base = {name: pd.read_csv(path) for name, path in files.items()}
    load_before = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs = []
    for n in sizes:
        # The Dask run, at the largest N only, is the comparison, not another curve.
        for workers in (0, args.dask_workers) if args.dask_workers and n == max(sizes) else (0,):
            runs.append(
                run(base, n, args.days, workers, args.model, args.fit_jobs, args.tune,
                    args.tune_limit)
            )  # fmt: skip
            r = runs[-1]
            print(f"{label(r)}: {r['wall_time_s']:.1f} s, peak "
                  f"{r['peak_total_bytes'] / MIB:,.0f} MiB, exit {r['exit_code']}",
                  flush=True)  # fmt: skip
            # Written after every run: a run stopped at a large N keeps the smaller ones.
            text = markdown(runs, (load_before, os.getloadavg()[0]))
            args.out.with_suffix(".md").write_text(text)
            args.out.with_suffix(".json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
