"""``prewarm backtest --config`` and ``train --tune`` on a real Dask cluster (a
``LocalCluster`` of two worker processes): the documents equal the local run's exactly, and
a scheduler that cannot be reached, or a malformed address, ends in one clear line."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from mlflow.tracking import MlflowClient

from prewarm.cli import cli
from prewarm.config_backtest import named_backtest
from training.compute import ComputeError, dask_client, map_calls
from training.config import load_config
from training.pipeline import run_training

distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as local:
        yield local


@pytest.fixture
def config(tmp_path: Path) -> Path:
    document = {
        "source": {"type": "file", "lookback": "9d", "files": {
            "cpu": str(DATA / "google_cluster_cpu_5min.csv"),
            "asg": str(DATA / "asg_cpu_utilization_5min.csv"),
            "twitter": str(DATA / "twitter_volume_amzn_5min.csv"),
        }},
        "workloads": [
            {"name": "cpu", "capacity": {"capacity_per_replica": 0.03, "max_replicas": 40}},
            {"name": "asg", "capacity": {"capacity_per_replica": 5, "max_replicas": 40}},
            {"name": "twitter", "capacity": {"capacity_per_replica": 40, "max_replicas": 100}},
        ],
        "model": {"params": {"n_estimators": 10}},
        "evaluation": {"window": "1d", "train_window": "5d"},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }  # fmt: skip
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def backtest(config: Path, *extra: str) -> Result:
    return CliRunner().invoke(cli, ["backtest", "--config", str(config), *extra])


def computed(cluster: object) -> int:
    """How many backtests the cluster's workers have computed."""
    prefixes = cluster.scheduler.task_prefixes  # type: ignore[attr-defined]
    prefix = named_backtest.__name__  # what each workload's call runs on a worker
    return int(prefixes[prefix].state_counts["memory"]) if prefix in prefixes else 0


def test_the_cluster_run_writes_the_local_run_documents(
    cluster: object, config: Path, tmp_path: Path
) -> None:
    local = backtest(config, "--json", str(tmp_path / "local.json"))
    assert local.exit_code == 0, local.output
    address = cluster.scheduler_address  # type: ignore[attr-defined]
    remote = backtest(config, "--json", str(tmp_path / "dask.json"), "--dask-scheduler", address)
    assert remote.exit_code == 0, remote.output

    documents = json.loads((tmp_path / "local.json").read_text())
    assert list(documents) == ["cpu", "asg", "twitter"]  # the config's order, on both
    assert (tmp_path / "dask.json").read_text() == (tmp_path / "local.json").read_text()
    assert computed(cluster) == 3  # on the cluster's workers, one backtest per workload


def test_the_config_names_the_scheduler(cluster: object, config: Path, tmp_path: Path) -> None:
    document = yaml.safe_load(config.read_text())
    document["workloads"] = document["workloads"][:1]
    document["compute"] = {"scheduler": cluster.scheduler_address}  # type: ignore[attr-defined]
    config.write_text(yaml.safe_dump(document))
    before = computed(cluster)
    trained = CliRunner().invoke(cli, ["train", "--config", str(config), "--tune", "--no-progress"])
    assert trained.exit_code == 0, trained.output
    assert computed(cluster) == before + 1


def test_the_gate_sweeps_on_the_cluster_and_logs_the_local_scores(
    cluster: object, config: Path, tmp_path: Path
) -> None:
    local_config = load_config(config)
    prefixes = cluster.scheduler.task_prefixes  # type: ignore[attr-defined]
    before = int(prefixes["sweep"].state_counts["memory"]) if "sweep" in prefixes else 0
    local = run_training(local_config, tracking_uri=f"sqlite:///{tmp_path / 'local.db'}")
    with dask_client(cluster.scheduler_address) as client:  # type: ignore[attr-defined]
        remote = run_training(
            local_config, tracking_uri=f"sqlite:///{tmp_path / 'dask.db'}", compute=client
        )
    # Every fold's sweep of every workload ran on the workers (the first run had no champion).
    swept = int(prefixes["sweep"].state_counts["memory"]) - before
    assert swept == 3 * local_config.evaluation.folds
    assert (remote.outcome, remote.data_fingerprint) == (local.outcome, local.data_fingerprint)
    metrics = [
        MlflowClient(f"sqlite:///{tmp_path / db}").get_run(str(run.run_id)).data.metrics
        for db, run in (("local.db", local), ("dask.db", remote))
    ]
    # The sweep's own results: each scored workload's unserved fraction per policy.
    assert sum(".unserved." in key for key in metrics[0]) >= 3 * len(local_config.scored_policies)
    # Identical, not close: the sweep is deterministic. Only the fit's timing differs.
    for logged in metrics:
        del logged["fit_seconds"]
    assert metrics[1] == metrics[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timeout(120)
def test_an_unreachable_scheduler_is_a_source_failure(config: Path) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"  # closed again: nothing listens there
    result = backtest(config, "--dask-scheduler", address)
    assert result.exit_code == 3, result.output
    assert f"Error: the Dask scheduler '{address}' did not answer within 10 s" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("address", ["http://dask:8786", "tcp://dask", "dask:8786"])
def test_a_malformed_address_is_a_usage_error(config: Path, address: str) -> None:
    result = backtest(config, "--dask-scheduler", address)
    assert result.exit_code == 2, result.output
    assert (
        f"a Dask scheduler address is tcp://HOST:PORT or tls://HOST:PORT, got '{address}'"
        in result.output
    )


def test_a_malformed_config_address_names_the_field(config: Path) -> None:
    document = yaml.safe_load(config.read_text())
    document["compute"] = {"scheduler": "tcp://dask:port"}
    config.write_text(yaml.safe_dump(document))
    result = backtest(config)
    assert result.exit_code == 2, result.output
    assert "compute.scheduler: a Dask scheduler address is" in result.output


def test_the_flag_needs_what_it_distributes() -> None:
    data = CliRunner().invoke(
        cli, ["backtest", str(DATA / "nyc_taxi_passengers_30min.csv"), "--dask-scheduler", "x"]
    )
    assert data.exit_code == 2 and "--dask-scheduler goes with --config, not DATA" in data.output


@pytest.mark.parametrize("command", ["backtest", "train"])
def test_help_explains_the_flag(command: str) -> None:
    text = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
    assert "--dask-scheduler ADDRESS" in text
    assert "on the workers of the existing Dask scheduler at ADDRESS" in text


@pytest.mark.timeout(120)
def test_a_scheduler_without_workers_is_refused() -> None:
    with distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=":0") as empty:
        refused = pytest.raises(ComputeError, match=r"has no worker after 2 s")
        with refused, dask_client(empty.scheduler_address, workers_timeout=2):
            pass  # pragma: no cover - the client is refused before


@pytest.mark.timeout(180)
def test_a_worker_that_dies_loses_the_work_with_a_clear_error(cluster: object) -> None:
    # Last in the module: each attempt kills the worker running it (the nanny restarts it).
    lost = pytest.raises(ComputeError, match=r"the Dask cluster lost the work of 'w': Killed")
    with dask_client(cluster.scheduler_address) as client:  # type: ignore[attr-defined]
        with lost:
            list(map_calls(os._exit, {"w": (1,)}, client))
        # The nannies are still restarting the killed workers: closing the cluster under a
        # restart fails (a process that has not started cannot be joined), so wait for both.
        client.wait_for_workers(2, timeout=120)
