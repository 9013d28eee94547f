"""The integration test's cluster of ``measured`` workloads, shared with its README report.

Three days of 1-minute demand for two workloads, ``chat`` and ``code``, with the ready
replicas chosen around a known capacity per replica and a vLLM-shaped queue
(``vllm:num_requests_waiting``) that grows exactly when demand exceeds ready replicas x that
capacity, the completions a counter of answered requests would count (``completed``, at most
what the ready replicas serve), and kube-state-metrics-shaped pod series with each pod's
creation and ready time (unix seconds), including pods that are not starts of the workload
in the lookback (created before it, never ready, another namespace).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from forecaster.scenarios import gpu_inference_demand
from tests.integration.prometheus import Family, Gauge

STEP, SCRAPE = 60, 15
END = 1_767_225_600  # 2026-01-01T00:00:00Z
DAYS = 3
START = END - DAYS * 86400
CAPACITY = {"chat": 5.0, "code": 2.0}
PODS = {"chat": 40, "code": 25}
LIFETIME = 3600  # seconds each pod's series lasts after its creation


def points(values: np.ndarray, step: int, start: int) -> list[tuple[float, float]]:
    return [(float(start + i * step), float(v)) for i, v in enumerate(values)]


def constant(value: float, since: float, until: float) -> list[tuple[float, float]]:
    """A gauge holding ``value``, scraped every ``SCRAPE`` seconds over ``[since, until)``."""
    stamps = np.arange(math.ceil(since / SCRAPE) * SCRAPE, until, SCRAPE)
    return [(float(t), value) for t in stamps]


def workload_series(name: str, seed: int, base: float) -> dict[str, np.ndarray]:
    """Demand, ready replicas around the true capacity and the queue they make."""
    rng = np.random.default_rng(seed)
    demand = gpu_inference_demand(days=DAYS, step=STEP, seed=seed, base_rate=base)["value"]
    demand = np.round(demand.to_numpy(), 3)
    ready = np.maximum(1.0, np.ceil(demand / (CAPACITY[name] * rng.uniform(0.6, 1.3, demand.size))))
    queue = np.zeros(demand.size)
    for t in range(demand.size - 1):
        queue[t + 1] = max(0.0, queue[t] + (demand[t] - ready[t] * CAPACITY[name]) * STEP)
    # What a counter of answered requests would have counted: at most what the ready serve.
    completed = np.round(np.minimum(demand, ready * CAPACITY[name]), 3)
    return {"demand": demand, "ready": ready, "queue": np.round(queue, 3), "completed": completed}


def pod_starts(name: str, seed: int) -> tuple[list[Any], list[Any], np.ndarray]:
    """``kube_pod_created`` and ``kube_pod_status_ready_time`` series, and the durations of
    the pods that count (created in the lookback, ready, in namespace ``prod``)."""
    rng = np.random.default_rng(seed)
    n = PODS[name]
    created = np.sort(rng.uniform(START + 600, END - LIFETIME, n)).round()
    durations = (60 + rng.lognormal(np.log(180), 0.6, n)).round()
    created_series: list[Any] = []
    ready_series: list[Any] = []
    for i, (c, d) in enumerate(zip(created, durations, strict=True)):
        labels = {"namespace": "prod", "pod": f"{name}-{i:04d}", "uid": f"{name}-{i}"}
        created_series.append((labels, constant(c, c, c + LIFETIME)))
        ready_series.append((labels, constant(c + d, c + d, c + LIFETIME)))
    # Pod 0's name re-created (as a StatefulSet does) under a new uid: another start.
    again = {"namespace": "prod", "pod": f"{name}-0000", "uid": f"{name}-again"}
    recreated = END - LIFETIME - 600.0
    created_series.append((again, constant(recreated, recreated, recreated + LIFETIME)))
    ready_series.append((again, constant(recreated + 100, recreated + 100, recreated + LIFETIME)))
    durations = np.append(durations, 100.0)
    # Created before the lookback (a very slow start), never ready, and another namespace:
    # none of them is a start of this workload in the lookback.
    early = {"namespace": "prod", "pod": f"{name}-early", "uid": f"{name}-e"}
    created_series.append((early, constant(START - 1800, START - 1800, START + 3600)))
    ready_series.append((early, constant(START - 1800 + 5000, START - 60, START + 3600)))
    stuck = {"namespace": "prod", "pod": f"{name}-stuck", "uid": f"{name}-s"}
    created_series.append((stuck, constant(START + 7200, START + 7200, START + 9000)))
    other = {"namespace": "staging", "pod": f"{name}-0000", "uid": f"{name}-o"}
    created_series.append((other, constant(START + 100, START + 100, START + 3700)))
    ready_series.append((other, constant(START + 9000, START + 9000, START + 9500)))
    return created_series, ready_series, durations


def workload_document(name: str) -> dict[str, Any]:
    # chat's ready replicas come from its deployment's gauges; code's from its ready pods
    # (the default query: kube_pod_status_ready of the pods the selector matches).
    deployment = (
        {}
        if name == "code"
        else {
            "replicas": f'kube_deployment_status_replicas{{deployment="{name}"}}',
            "ready_replicas": f'kube_deployment_status_replicas_available{{deployment="{name}"}}',
        }
    )
    return {
        "name": name,
        "demand": f'demand{{workload="{name}"}}',
        **deployment,
        "capacity": {"capacity_per_replica": "auto", "cold_start": "auto", "max_replicas": 80,
                     "slo_unserved_fraction": 0.01},
        "measured": {"pods": f'namespace="prod", pod=~"{name}-.*"',
                     "queue": f'sum(vllm:num_requests_waiting{{model_name="{name}"}})'},
    }  # fmt: skip


def config_document(root: Path, url: str) -> dict[str, Any]:
    return {
        "source": {"type": "prometheus", "url": url, "step": "1m", "retries": 0,
                   "lookback": f"{DAYS}d", "end": "2026-01-01T00:00:00Z"},
        "workloads": [workload_document("chat"), workload_document("code")],
        "model": {"params": {"n_estimators": 15, "learning_rate": 0.3},
                  "features": {"scale_window": "2h", "seasonal_lags": ["1d"]}},
        "evaluation": {"window": "12h", "train_window": "2d", "policies": ["predictive"]},
        "validation": {"min_history": "1d"},
        "gate": {"coverage_tolerance": 1.0},
        "mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}",
                   "registered_model": "measured"},
    }  # fmt: skip


class ClusterData(NamedTuple):
    families: list[Family]
    """Every series to backfill."""
    durations: dict[str, np.ndarray]
    """Each workload's cold starts that count."""
    capped: dict[str, float]
    """Each workload's share of steps its completion counter sits within 5 % of the ceiling."""
    series: dict[str, dict[str, np.ndarray]]
    """Each workload's demand, ready replicas, queue and completions, one per minute."""


def cluster_families() -> ClusterData:
    """The series of both workloads, and what they were made with."""
    families: dict[str, list[Any]] = {
        "demand": [], "completed": [], "kube_deployment_status_replicas": [],
        "kube_deployment_status_replicas_available": [], "vllm:num_requests_waiting": [],
        "kube_pod_created": [], "kube_pod_status_ready_time": [], "kube_pod_status_ready": [],
    }  # fmt: skip
    durations: dict[str, np.ndarray] = {}
    capped: dict[str, float] = {}
    made: dict[str, dict[str, np.ndarray]] = {}
    for seed, (name, base) in enumerate((("chat", 40.0), ("code", 10.0)), start=1):
        series = made[name] = workload_series(name, seed, base)
        deployment = {"deployment": name}
        for family in ("demand", "completed"):
            families[family].append(({"workload": name}, points(series[family], STEP, START)))
        # The steps a completion counter sits within 5 % of ready x capacity.
        capped[name] = float(np.mean(series["demand"] >= 0.95 * series["ready"] * CAPACITY[name]))
        for family in (
            "kube_deployment_status_replicas",
            "kube_deployment_status_replicas_available",
        ):
            families[family].append((deployment, points(series["ready"], STEP, START)))
        by_pods = "ready_replicas" not in workload_document(name)
        for slot in range(int(series["ready"].max()) if by_pods else 0):
            # Pod `slot` is ready while more than `slot` replicas are.
            labels = {"condition": "true", "namespace": "prod", "pod": f"{name}-slot-{slot}"}
            ready_pod = (series["ready"] > slot).astype(float)
            families["kube_pod_status_ready"].append((labels, points(ready_pod, STEP, START)))
        families["vllm:num_requests_waiting"].append(
            ({"model_name": name, "pod": f"{name}-0000"}, points(series["queue"], STEP, START))
        )
        created, ready, durations[name] = pod_starts(name, seed + 10)
        families["kube_pod_created"] += created
        families["kube_pod_status_ready_time"] += ready
    gauges = [Gauge(name, series) for name, series in families.items()]
    return ClusterData(gauges, durations, capped, made)
