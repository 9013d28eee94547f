"""Soak benchmark: a long run at a fixed request rate, with refreshes and source outages.

A real uvicorn server (its own process, ``prewarm serve``'s app and refresh loop) serves
``--workloads`` workloads whose data arrives in real time, one point a minute, from an
in-memory source; the refresher runs every 15 s. Every ``--outage-every`` the source fails
(each fetch raises the error an unreachable Prometheus gives) for ``--outage-for``, longer
than ``max_staleness`` minus the data's normal age, so each outage ends with the workloads
stale and the metric answering the hold error (503) until the source is back.

The load is open-loop: requests are *scheduled* at a fixed rate (``--rate``, default 500/s)
over the workloads in turn, and each latency is measured from its scheduled time, so a
server that stalls shows as latency instead of slowing the generator down.

Reported per minute: answers by status, p99 latency, the server's resident memory (its
process and the planning child) and the bytes its log grew by. Overall: unexpected answers
(anything but 200, or 503 while a workload may be stale), RSS drift after the first two
minutes (target: flat within 5%), and log bytes.

    python benchmarks/soak.py [--minutes 30] [--rate 500] [--workloads 200]

Writes ``benchmarks/results/soak.md`` and ``soak.json`` (``--out`` to change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.serving_latency import (  # noqa: E402
    STEP,
    FrameSource,
    OneVersion,
    build,
    free_port,
    metric_url,
    names,
    rss_bytes,
    wait_ready,
)

RESULTS = ROOT / "benchmarks" / "results"
REFRESH_S = 15.0
MAX_STALENESS_S = 90.0  # normal data age is at most one step (60 s) plus one refresh (15 s)
RSS_FLAT = 0.05


class LiveSource(FrameSource):
    """The benchmark's in-memory source with data arriving in real time, and outages.

    Each fetch first appends the points whose minute has come (a daily wave with noise, as
    :func:`benchmarks.serving_latency.build` draws the history). Inside an outage window the
    fetch raises the :class:`~training.exceptions.HistoryFetchError` that a refused
    connection to Prometheus gives.
    """

    def __init__(self, source: FrameSource, epoch: float, every: float, duration: float) -> None:
        # the history of ``source`` (not FrameSource.__init__: there is no frame to read)
        self.start, self.values = source.start, dict(source.values)
        self.epoch, self.every, self.duration = epoch, every, duration
        self.level = {name: float(np.median(v)) for name, v in self.values.items()}
        self.rng = np.random.default_rng(1)

    def in_outage(self) -> bool:
        return in_outage(time.time() - self.epoch, self.every, self.duration)

    def _arrive(self) -> None:
        now = int(time.time())
        for name, values in self.values.items():
            cells = (now - self.start) // STEP + 1
            if cells > len(values):
                minute = np.arange(len(values), cells)
                wave = 1 + 0.3 * np.sin(2 * np.pi * minute / 1440)
                noise = 1 + 0.05 * self.rng.standard_normal(len(minute))
                self.values[name] = np.concatenate([values, self.level[name] * wave * noise])

    def fetch(self, queries: Any, start: Any, end: Any, step: Any, **kwargs: Any) -> Any:
        from training.exceptions import HistoryFetchError

        if self.in_outage():
            raise HistoryFetchError(
                "cannot reach Prometheus at http://prometheus:9090: connection refused"
            )
        self._arrive()
        return super().fetch(queries, start, end, step, **kwargs)


def in_outage(elapsed: float, every: float, duration: float) -> bool:
    """Whether the source is down ``elapsed`` seconds after the epoch: for ``duration``
    seconds every ``every`` seconds, the first time after ``every``."""
    return elapsed > every and elapsed % every < duration


def serve(port: int, n: int, epoch: float, every: float, duration: float, log_path: str) -> None:
    """Child process: the app as ``prewarm serve`` runs it, logging to ``log_path``."""
    import dataclasses

    import uvicorn

    from serving.api.app import create_app, uvicorn_config
    from serving.api.runtime import ServingComponents
    from serving.engine.observability import configure_logging
    from serving.settings import ServingSettings

    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    settings = ServingSettings(port=port, grpc_port=None)  # the default log level
    configure_logging(settings.log_level)
    config, frame_source, planner = build(n)
    source = LiveSource(frame_source, epoch, every, duration)
    serving = config.serving.model_copy(
        update={"refresh_interval": REFRESH_S, "max_staleness": MAX_STALENESS_S}
    )
    config = dataclasses.replace(config, serving=serving)
    app = create_app(settings, ServingComponents(config, lambda: source, OneVersion(planner)))
    uvicorn.Server(uvicorn_config(app, settings)).run()


CONNECTIONS = 32


async def get(
    port: int, target: bytes, stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None
) -> tuple[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """One keep-alive HTTP/1.1 GET of ``target``: the status and the (re)used connection.

    A minimal client on purpose: httpx's pool costs more CPU per request than the server
    does, and falls behind at a few hundred requests a second on a shared core.
    """
    reader, writer = stream or await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return status, (reader, writer)


async def load(
    port: int, rate: float, seconds: float, n: int, server_pid: int, log_path: Path
) -> tuple[float, list[tuple[float, int, float]], list[tuple[float, int, int]]]:
    """Open-loop load: the wall-clock start, ``(sent at, status, latency ms)`` per request
    (seconds from the start), and one ``(elapsed s, rss bytes, log bytes)`` sample every
    10 s.

    Request ``k`` is due at ``k / rate``; each of :data:`CONNECTIONS` workers takes the
    next due request, waits for its time and sends it. When every worker is busy a request
    goes out late, and its latency, counted from when it was due, says so.
    """
    targets = [metric_url(port, w).split(str(port), 1)[1].encode() for w in names(n)]
    results: list[tuple[float, int, float]] = []
    samples: list[tuple[float, int, int]] = []
    total = int(rate * seconds)
    due = iter(range(total))
    began, began_wall = time.perf_counter(), time.time()

    async def worker() -> None:
        stream = None
        for k in due:
            scheduled = began + k / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                status, stream = await asyncio.wait_for(get(port, targets[k % n], stream), 10)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                if stream is not None:
                    stream[1].close()
                status, stream = 0, None  # no answer: refused, reset, timed out or garbled
            results.append((scheduled - began, status, (time.perf_counter() - scheduled) * 1e3))

    async def sample() -> None:
        while True:
            samples.append(
                (time.perf_counter() - began, rss_bytes(server_pid), log_path.stat().st_size)
            )
            await asyncio.sleep(10)

    sampler = asyncio.create_task(sample())
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    sampler.cancel()
    return began_wall, results, samples


def may_be_stale(elapsed: float, every: float, duration: float) -> bool:
    """Whether a workload may be stale ``elapsed`` seconds after the epoch: inside an
    outage, or before the first refreshes after it have renewed the data."""
    return in_outage(elapsed, every, duration + 2 * REFRESH_S)


def summarise(
    offset: float,
    results: list[tuple[float, int, float]],
    samples: list[tuple[float, int, int]],
    every: float,
    duration: float,
) -> dict[str, Any]:
    """Per-minute and overall figures; ``offset`` is the load's start after the epoch."""
    frame = pd.DataFrame(results, columns=["sent", "status", "ms"])
    frame["minute"] = (frame["sent"] // 60).astype(int)
    stale_window = frame["sent"].map(lambda s: may_be_stale(s + offset, every, duration))
    expected = (frame["status"] == 200) | ((frame["status"] == 503) & stale_window)
    rss = pd.DataFrame(samples, columns=["elapsed", "rss", "log"])
    rss["minute"] = (rss["elapsed"] // 60).astype(int)
    minutes = []
    for minute, part in frame.groupby("minute"):
        at = rss[rss["minute"] == minute]
        minutes.append(
            {
                "minute": int(minute) + 1,
                "requests": len(part),
                "ok": int((part["status"] == 200).sum()),
                "hold_503": int((part["status"] == 503).sum()),
                "other": int(((part["status"] != 200) & (part["status"] != 503)).sum()),
                "p99_ms": float(np.percentile(part["ms"], 99)),
                "rss_mib": float(at["rss"].iloc[-1] / 2**20) if len(at) else None,
                "log_bytes": int(at["log"].iloc[-1]) if len(at) else 0,
            }
        )
    settled = rss[rss["elapsed"] >= 120]["rss"]
    drift = float(settled.max() / settled.min() - 1) if len(settled) else None
    return {
        "requests": len(frame),
        "ok": int((frame["status"] == 200).sum()),
        "hold_503": int((frame["status"] == 503).sum()),
        "unexpected": int((~expected).sum()),
        "no_answer": int((frame["status"] == 0).sum()),
        "p99_ms": float(np.percentile(frame["ms"], 99)),
        "p99_ms_worst_minute": max(m["p99_ms"] for m in minutes),
        "rss_drift": drift,
        "rss_flat": drift is not None and drift <= RSS_FLAT,
        "log_bytes": int(rss["log"].iloc[-1]) if len(rss) else 0,
        "minutes": minutes,
    }


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def markdown(
    summary: dict[str, Any], args: argparse.Namespace, load_avg: tuple[float, float]
) -> str:
    rows = [
        "| minute | requests | 200 | 503 (hold) | other | p99 ms | RSS MiB | log bytes |",
        "| ------ | -------- | --- | ---------- | ----- | ------ | ------- | --------- |",
    ]
    for m in summary["minutes"]:
        rows.append(
            f"| {m['minute']} | {m['requests']:,} | {m['ok']:,} | {m['hold_503']:,} | "
            f"{m['other']:,} | {m['p99_ms']:.2f} | {_number(m['rss_mib'], '.1f')} | "
            f"{m['log_bytes']:,} |"
        )
    verdict = "flat" if summary["rss_flat"] else "NOT flat"
    return "\n".join(
        [
            "# Soak: fixed request rate, refreshes and source outages",
            "",
            f"{args.minutes} minutes at {args.rate:g} requests/s (open loop, latency from the "
            f"scheduled send), {args.workloads} workloads, refresh every {REFRESH_S:g} s, "
            f"max_staleness {MAX_STALENESS_S:g} s, a source outage of {args.outage_for:g} s "
            f"every {args.outage_every:g} s. Machine: 2 cores shared by the server, its "
            f"planning process and the load generator; 1-minute load average "
            f"{load_avg[0]:.2f} before, {load_avg[1]:.2f} after.",
            "",
            "| measure | value |",
            "| ------- | ----- |",
            f"| requests | {summary['requests']:,} |",
            f"| 200 answers | {summary['ok']:,} |",
            f"| 503 hold answers (stale data during outages) | {summary['hold_503']:,} |",
            f"| unexpected answers (not 200; or 503 outside an outage) | "
            f"{summary['unexpected']:,} |",
            f"| requests without an answer | {summary['no_answer']:,} |",
            f"| p99 latency, whole run | {summary['p99_ms']:.2f} ms |",
            f"| p99 latency, worst minute | {summary['p99_ms_worst_minute']:.2f} ms |",
            f"| RSS drift after minute 2 (max / min - 1) | {_number(summary['rss_drift'], '.1%')} "
            f"({verdict}; target within {RSS_FLAT:.0%}) |",
            f"| log bytes written | {summary['log_bytes']:,} |",
            "",
            *rows,
            "",
            "Reproduce: `python benchmarks/soak.py` (not in CI: it runs for half an hour).",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=500, help="requests per second")
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--outage-every", type=float, default=300, help="seconds")
    parser.add_argument("--outage-for", type=float, default=120, help="seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    log_path = args.out / "soak.log"
    port = free_port()
    before = os.getloadavg()[0]
    epoch = time.time()  # the outage schedule's zero, shared by the server and the report
    # Not a daemon: the server starts its planning child process, which daemons may not.
    server = mp.Process(
        target=serve,
        args=(port, args.workloads, epoch, args.outage_every, args.outage_for, str(log_path)),
    )
    server.start()
    try:
        wait_ready(port)
        assert server.pid is not None
        began, results, samples = asyncio.run(
            load(port, args.rate, args.minutes * 60, args.workloads, server.pid, log_path)
        )
    finally:
        server.terminate()
        server.join(timeout=10)
    summary = summarise(began - epoch, results, samples, args.outage_every, args.outage_for)
    text = markdown(summary, args, (before, os.getloadavg()[0]))
    (args.out / "soak.md").write_text(text + "\n")
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    log_path.unlink()
    print(text)


if __name__ == "__main__":
    main()
