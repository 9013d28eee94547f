"""``cold_start: auto`` and ``capacity_per_replica: auto`` against a real backfilled Prometheus.

Three days of 1-minute demand for two workloads, with the ready replicas chosen around a
known capacity per replica and a vLLM-shaped queue (``vllm:num_requests_waiting``) that
grows exactly when demand exceeds ready replicas x that capacity (chat's ready replicas are
its deployment's gauge, code's the sum of its pods' ready condition). kube-state-metrics-shaped
pod series give each pod's creation and ready time (unix seconds): pods created before the
lookback, a pod never ready and another namespace's pod with the same name prefix are not
part of the distribution. Training with both fields ``auto`` registers policies planning
with the measured values, and the MLflow run holds the distribution and its plot. The demand
is arrival-side and crosses ready x capacity; a completion counter of the same fleet
(``completed``, at most what the ready replicas serve) is warned about as capped.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.train import EXIT_DATA
from tests.integration.prometheus import Gauge
from training.config import parse_config
from training.exceptions import NoSeriesError
from training.measured import log_measured, resolve_measured
from training.pipeline import TrainResult, run_training
from training.registry import load_champion
from training.sources import make_source

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

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


class Cluster:
    def __init__(
        self, root: Path, url: str, durations: dict[str, np.ndarray], capped: dict[str, float]
    ) -> None:
        self.root, self.url, self.durations, self.capped = root, url, durations, capped
        self.uri = f"sqlite:///{root / 'mlflow.db'}"

    def document(self, **changes: Any) -> dict[str, Any]:
        """The configuration, with ``changes`` in every workload's ``measured`` section."""
        document = config_document(self.root, self.url)
        for workload in document["workloads"]:
            workload["measured"].update(changes)
        return document

    def config(self, **changes: Any) -> Any:
        return parse_config(self.document(**changes))


@pytest.fixture(scope="module")
def cluster(prometheus_factory: Callable[..., Any], tmp_path_factory: Any) -> Cluster:
    families: dict[str, list[Any]] = {
        "demand": [], "completed": [], "kube_deployment_status_replicas": [],
        "kube_deployment_status_replicas_available": [], "vllm:num_requests_waiting": [],
        "kube_pod_created": [], "kube_pod_status_ready_time": [], "kube_pod_status_ready": [],
    }  # fmt: skip
    durations, capped = {}, {}
    for seed, (name, base) in enumerate((("chat", 40.0), ("code", 10.0)), start=1):
        series = workload_series(name, seed, base)
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
    server = prometheus_factory([Gauge(name, series) for name, series in families.items()])
    return Cluster(tmp_path_factory.mktemp("measured"), server.url, durations, capped)


@pytest.fixture(scope="module")
def measured(cluster: Cluster) -> dict[str, Any]:
    config = cluster.config()
    source = make_source(config.source.type, config.source)
    try:
        return resolve_measured(config, source)[1]
    finally:
        source.close()


@pytest.mark.parametrize("name", ["chat", "code"])
def test_measured_cold_start_p90_is_the_backfilled_one(
    measured: dict[str, Any], cluster: Cluster, name: str
) -> None:
    cold = measured[name].cold_start
    truth = cluster.durations[name]
    # The re-created pod counts; the early, stuck and staging pods do not.
    assert len(cold.durations) == PODS[name] + 1 == len(truth)
    assert abs(cold.seconds - np.quantile(truth, 0.9)) <= SCRAPE
    assert abs(cold.summary["median"] - np.median(truth)) <= SCRAPE
    assert cold.summary["max"] == pytest.approx(truth.max(), abs=SCRAPE)


@pytest.mark.parametrize("name", ["chat", "code"])
def test_measured_capacity_is_within_ten_percent_of_the_true_one(
    measured: dict[str, Any], name: str
) -> None:
    capacity = measured[name].capacity
    assert capacity.method == "queue growth"
    assert capacity.per_replica == pytest.approx(CAPACITY[name], rel=0.10)


@pytest.mark.parametrize("name", ["chat", "code"])
def test_arrival_demand_is_not_capped(measured: dict[str, Any], name: str) -> None:
    check = measured[name].capped
    assert not check.capped
    assert check.above > check.at_ceiling > 0  # the fleet was saturated, and demand crossed it


def test_completions_capped_at_ready_times_capacity_are_warned_about_and_tagged(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    document = cluster.document()
    for workload in document["workloads"]:
        workload["demand"] = f'completed{{workload="{workload["name"]}"}}'
    config = parse_config(document)
    source = make_source(config.source.type, config.source)
    try:
        with caplog.at_level(logging.WARNING, logger="training.measured"):
            _, found = resolve_measured(config, source)
    finally:
        source.close()
    client = mlflow.MlflowClient(cluster.uri)
    run = client.create_run(client.create_experiment("capped")).info.run_id
    log_measured(client, run, found)
    tags, metrics = client.get_run(run).data.tags, client.get_run(run).data.metrics
    for name in ("chat", "code"):
        check = found[name].capped
        assert check.capped and check.above == 0
        assert check.share == pytest.approx(cluster.capped[name], abs=0.01)
        assert f"{name}: demand plateaus at ready replicas x capacity" in caplog.text
        assert f"{name}: demand plateaus" in tags["prewarm.capped_demand"]
        assert metrics[f"measured.{name}.capped_share"] == pytest.approx(check.share)


def test_too_few_starts_fall_back_to_the_configured_value(cluster: Cluster) -> None:
    config = cluster.config(min_starts=50, cold_start_fallback="7m")
    source = make_source(config.source.type, config.source)
    try:
        resolved, found = resolve_measured(config, source)
    finally:
        source.close()
    assert not found["chat"].cold_start.measured
    assert resolved.workloads[0].spec.cold_start_model.seconds == 420.0
    assert "falls back to 420 s" in found["chat"].cold_start.describe()


def test_a_configured_capacity_is_kept_and_the_estimate_reported_beside_it(
    cluster: Cluster,
) -> None:
    document = cluster.document()
    document["workloads"][0]["capacity"].update(capacity_per_replica=4.0, cold_start="6m")
    source = make_source("prometheus", parse_config(document).source)
    try:
        resolved, found = resolve_measured(parse_config(document), source)
    finally:
        source.close()
    spec = resolved.workloads[0].spec
    assert (spec.capacity_per_replica, spec.cold_start_model.seconds) == (4.0, 360.0)
    assert found["chat"].capacity.per_replica == pytest.approx(CAPACITY["chat"], rel=0.10)
    assert found["chat"].configured_capacity == 4.0


def test_a_selector_matching_no_pod_names_the_workload(cluster: Cluster) -> None:
    config = cluster.config(pods='namespace="prod", pod=~"chta-.*"')
    source = make_source(config.source.type, config.source)
    try:
        with pytest.raises(NoSeriesError, match=r"no kube_pod_created .* workload 'chat'"):
            resolve_measured(config, source)
    finally:
        source.close()


@pytest.fixture(scope="module")
def trained(cluster: Cluster) -> TrainResult:
    result = run_training(cluster.config(), tracking_uri=cluster.uri)
    assert result.version == "1", result.message
    return result


def test_auto_trains_a_model_whose_policies_use_the_measured_values(
    cluster: Cluster, measured: dict[str, Any], trained: TrainResult
) -> None:
    result = trained
    policies = load_champion("measured", cluster.uri).model.policies
    for name in ("chat", "code"):
        spec = policies[name].spec
        assert spec.cold_start_model.seconds == math.ceil(measured[name].cold_start.seconds)
        assert spec.capacity_per_replica == measured[name].capacity.per_replica
        assert spec.capacity_per_replica == pytest.approx(CAPACITY[name], rel=0.10)
    run = mlflow.MlflowClient(cluster.uri).get_run(result.run_id)
    assert run.data.metrics["measured.chat.cold_start_count"] == PODS["chat"] + 1
    assert run.data.params["measured.code.cold_start_source"] == f"q0.9 of {PODS['code'] + 1}"
    artifacts = [
        a.path for a in mlflow.MlflowClient(cluster.uri).list_artifacts(result.run_id, "measured")
    ]
    assert artifacts == ["measured/cold_start.png"]
    assert run.data.metrics["measured.chat.capped_share"] == measured["chat"].capped.share
    assert "prewarm.capped_demand" not in run.data.tags


def cli_train(cluster: Cluster, name: str, **changes: Any) -> Any:
    path = cluster.root / name
    path.write_text(yaml.safe_dump(cluster.document(**changes)))
    arguments = ["train", "--config", str(path), "--tracking-uri", cluster.uri, "--no-progress"]
    return CliRunner().invoke(cli, arguments)


def test_the_cli_measures_the_same_values_and_has_nothing_to_do(
    cluster: Cluster, trained: TrainResult
) -> None:
    outcome = cli_train(cluster, "same.yaml")
    assert outcome.exit_code == 0, outcome.output
    assert "version 1 of 'measured' was trained on the same data" in outcome.output


def test_the_cli_names_the_workload_whose_pods_match_nothing(cluster: Cluster) -> None:
    outcome = cli_train(cluster, "typo.yaml", pods='pod=~"nothing-.*"')
    assert outcome.exit_code == EXIT_DATA, outcome.output
    assert "no kube_pod_created series match the pods of workload 'chat'" in outcome.output
    assert "Traceback" not in outcome.output
