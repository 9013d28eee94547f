"""Shared pieces of the serving tests: an in-memory source, a real planner, a live server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import uvicorn

from forecaster.models.baseline import LastValue
from forecaster.workload import WorkloadPolicy, WorkloadSpec
from serving.engine.window import RollingWindow, WorkloadQuery
from serving.settings import RefreshConfig, WorkloadConfig
from training.config import ServingConfig
from training.registry import LoadedModel, PlanningModel
from training.sources.base import FetchedHistory

STEP = 10
"""Grid step of the unit tests' histories, in seconds."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def history(
    names: Mapping[str, float], end: pd.Timestamp, cells: int, step: int = STEP
) -> pd.DataFrame:
    """A long frame: each workload at a constant level with a small deterministic wiggle."""
    end = end.floor(f"{step}s")
    times = pd.date_range(end=end, periods=cells, freq=f"{step}s", tz="UTC")
    parts = []
    for i, (name, level) in enumerate(names.items()):
        wiggle = 0.05 * level * np.sin(np.arange(cells) / 7.0 + i)
        parts.append(pd.DataFrame({"series": name, "timestamp": times, "value": level + wiggle}))
    return pd.concat(parts, ignore_index=True)


@dataclass
class FrameSource:
    """A history source over an in-memory long frame, with injectable failures.

    ``calls`` records every fetch as ``(workloads, start, end)``; ``fail`` makes every fetch
    raise (a source outage); a fetch that includes a workload of ``broken`` raises (a bad
    query, as Prometheus fails the whole call for it); ``frame`` can be extended as "time
    passes".
    """

    frame: pd.DataFrame
    fail: str | None = None
    broken: set[str] = field(default_factory=set)
    calls: list[tuple[tuple[str, ...], pd.Timestamp, pd.Timestamp]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch(
        self,
        queries: Mapping[str, str],
        start: Any,
        end: Any,
        step: int | str,
        *,
        covariates: Mapping[str, Mapping[str, str]] | None = None,
    ) -> FetchedHistory:
        start, end = pd.Timestamp(start), pd.Timestamp(end)
        with self.lock:
            self.calls.append((tuple(queries), start, end))
            if self.fail:
                raise ConnectionError(self.fail)
            bad = sorted(set(queries) & self.broken)
            if bad:
                raise ValueError(f"no such metric: {bad[0]}")
            frame = self.frame
        parts = []
        grid = pd.date_range(start, end, freq=f"{int(step)}s")
        for name, query in queries.items():
            part = frame[(frame["series"] == query)].set_index("timestamp")["value"]
            values = part.reindex(grid).to_numpy(dtype=float)
            parts.append(pd.DataFrame({"series": name, "timestamp": grid, "value": values}))
        out = pd.concat(parts, ignore_index=True)
        return FetchedHistory(out, (), grid[0], grid[-1], int(step))

    def extend(self, until: pd.Timestamp, levels: Mapping[str, float], step: int = STEP) -> None:
        """Append constant points per workload after the current end, up to ``until``."""
        with self.lock:
            last = self.frame["timestamp"].max()
            times = pd.date_range(last + pd.Timedelta(seconds=step), until, freq=f"{step}s")
            extra = [
                pd.DataFrame({"series": name, "timestamp": times, "value": float(level)})
                for name, level in levels.items()
            ]
            self.frame = pd.concat([self.frame, *extra], ignore_index=True)


def window_over(
    source: FrameSource, names: Iterable[str], cells: int, **options: Any
) -> RollingWindow:
    """A rolling window of ``cells`` steps over ``source``, one query per workload of
    ``names``, named as its series."""
    return RollingWindow(
        [WorkloadQuery(name, name) for name in names],
        lambda: source,
        window_seconds=cells * STEP,
        step=STEP,
        **options,
    )


def specs(names: Mapping[str, float], **overrides: Any) -> dict[str, WorkloadSpec]:
    base: dict[str, Any] = {
        "capacity_per_replica": 10.0,
        "cold_start": 30.0,
        "target_utilization": 0.8,
        "min_replicas": 1,
        "max_replicas": 50,
        "quantile": 0.9,
    }
    base.update(overrides)
    return {name: WorkloadSpec(**base) for name in names}


def fit_planner(
    frame: pd.DataFrame,
    workload_specs: Mapping[str, WorkloadSpec],
    make: Callable[[list[int], list[float]], Any] | None = None,
) -> Any:
    """A real ``PrewarmModel``: a last-value forecaster (or ``make(horizons, quantiles)``)
    covering every lead window."""
    from forecaster.capacity import required_horizons
    from training.pyfunc import PrewarmModel

    step = int((frame["timestamp"].iloc[1] - frame["timestamp"].iloc[0]).total_seconds())
    horizons = sorted({h for s in workload_specs.values() for h in required_horizons(s, step)})
    quantiles = sorted({0.5, *(s.tau for s in workload_specs.values())})
    if make is None:
        model = LastValue(horizons=horizons, quantiles=quantiles, scale_window="10m")
    else:
        model = make(horizons, quantiles)
    model.fit(frame)
    return PrewarmModel(model, {name: WorkloadPolicy(s) for name, s in workload_specs.items()})


class DictRegistry:
    """A registry of in-memory versions; the champion is whatever ``champion`` names.

    The MLflow-backed registry is exercised in ``tests/integration/test_serving_live.py``.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.versions: dict[str, Any] = {}
        self.champion: str | None = None
        self.loads = 0

    def add(self, model: Any, *, champion: bool = True) -> str:
        version = str(len(self.versions) + 1)
        self.versions[version] = model
        if champion:
            self.champion = version
        return version

    def champion_version(self, name: str) -> str | None:
        return self.champion

    def load(self, name: str, version: str) -> LoadedModel[PlanningModel]:
        self.loads += 1
        model = self.versions[version]
        if isinstance(model, Exception):
            raise model
        return LoadedModel(name, version, model)


def refresh_config(
    names: Mapping[str, float],
    *,
    workload_specs: Mapping[str, WorkloadSpec] | None = None,
    **overrides: Any,
) -> RefreshConfig:
    """A refresher config of ``names``; ``overrides`` are fields of the config or of its
    ``serving`` section."""
    workload_specs = workload_specs or specs(names)
    serving: dict[str, Any] = {
        "refresh_interval": 0.2,
        "max_staleness": 60.0,
        "history_window": 30 * STEP,
        "poll_model_every": 0.1,
        "fetch_workers": 2,
    }
    serving.update(
        (k, overrides.pop(k)) for k in list(overrides) if k in ServingConfig.model_fields
    )
    return RefreshConfig(
        workloads=[WorkloadConfig(n, n, WorkloadPolicy(workload_specs[n])) for n in names],
        model_name="prewarm-test",
        serving=ServingConfig(**serving),
        **overrides,
    )


def start_server(
    app: Any, config_factory: Callable[[Any], uvicorn.Config]
) -> tuple[uvicorn.Server, threading.Thread]:
    """Start ``app`` under uvicorn in a background thread; the caller stops it
    (``server.should_exit = True``, then join the thread)."""
    server = uvicorn.Server(config_factory(app))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread


@contextmanager
def running(app: Any, config_factory: Callable[[Any], uvicorn.Config]) -> Iterator[uvicorn.Server]:
    """Run ``app`` under uvicorn in a background thread until the block ends."""
    server, thread = start_server(app, config_factory)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, every: float = 0.05) -> None:
    """Poll ``condition`` until true or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout} s")


SAMPLE_WORKLOAD = "chat"
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "summary": ("_sum", "_count", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}


def exported_metric_names() -> set[str]:
    """Every series name a scrape of the service can hold, from its real registry (served
    over TLS, so the certificate's metrics are in)."""
    from datetime import UTC, datetime

    from serving.engine.observability import ServingMetrics
    from serving.engine.snapshot import Snapshot, WorkloadForecast, WorkloadState

    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    forecast = WorkloadForecast(
        SAMPLE_WORKLOAD, 2, 10.0, 0.9, 30.0, now, now, "1", 10.0, 0.8, 1, 5, {0.9: 10.0}, 30.0
    )
    state = WorkloadState(SAMPLE_WORKLOAD, forecast, now, 9.0)
    snapshot = Snapshot({SAMPLE_WORKLOAD: state}, max_staleness=60.0, model_version="1")
    metrics = ServingMetrics(
        lambda: snapshot, tls_changes=lambda: (0, 0), tls_expiry=lambda: now.timestamp()
    )
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ()))
    return names
