"""``cold_start: auto`` and ``capacity_per_replica: auto`` against a real backfilled Prometheus.

The cluster is :mod:`tests.integration.measured_cluster`'s: two workloads, ready replicas
around a known capacity per replica and a queue that grows exactly above it (chat's ready
replicas are its deployment's gauge, code's the sum of its pods' ready condition), and
kube-state-metrics-shaped pod series: pods created before the lookback, a pod never ready
and another namespace's pod with the same name prefix are not part of the distribution.
Training with both fields ``auto`` registers policies planning with the measured values, and
the MLflow run holds the distribution and its plot. The demand is arrival-side and crosses
ready x capacity; a completion counter of the same fleet (``completed``, at most what the
ready replicas serve) is warned about as capped.
"""

from __future__ import annotations

import json
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

from prewarm.cli import cli
from prewarm.train import EXIT_DATA
from tests.integration.measured_cluster import (
    CAPACITY,
    PODS,
    SCRAPE,
    cluster_families,
    config_document,
)
from training.config import parse_config
from training.exceptions import NoSeriesError
from training.measured import log_measured, resolve_measured
from training.pipeline import TrainResult, run_training
from training.registry import load_champion
from training.sources import make_source

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


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
    data = cluster_families()
    server = prometheus_factory(data.families)
    return Cluster(tmp_path_factory.mktemp("measured"), server.url, data.durations, data.capped)


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
    # The capped-demand check compares with what the replicas serve, not the typed value.
    assert found["chat"].capped.capacity == found["chat"].capacity.per_replica


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


def test_backtest_config_measures_auto_as_train_does(
    cluster: Cluster, measured: dict[str, Any]
) -> None:
    path = cluster.root / "backtest.yaml"
    path.write_text(yaml.safe_dump(cluster.document()))
    out = cluster.root / "backtest.json"
    arguments = ["backtest", "--config", str(path), "--workload", "code", "--json", str(out)]
    outcome = CliRunner().invoke(cli, [*arguments, "--tracking-uri", cluster.uri])
    assert outcome.exit_code == 0, outcome.output
    settings = json.loads(out.read_text())["code"]["settings"]
    cold = measured["code"].cold_start
    assert settings["cold_start_seconds"] == math.ceil(cold.seconds)
    assert settings["capacity_per_replica"] == measured["code"].capacity.per_replica


def test_train_tune_measures_auto_before_its_backtests(cluster: Cluster) -> None:
    path = cluster.root / "tune.yaml"
    path.write_text(yaml.safe_dump(cluster.document()))
    arguments = ["train", "--config", str(path), "--tune", "--tracking-uri", cluster.uri]
    outcome = CliRunner().invoke(cli, [*arguments, "--no-progress"])
    # Promoted, or trained and kept the champion; an `auto` left unmeasured is a config
    # error (exit 2) naming the field.
    assert outcome.exit_code in (0, 4), outcome.output
    assert "is `auto`" not in outcome.output
