"""The install's MLflow choice, run for real: ``mlflow server`` with the arguments of the
rendered Deployment (only the address and paths moved into a temp dir; its allowed hosts
admit loopback, as for ``kubectl port-forward``), training logging and
registering over ``http://``, serving loading the champion over ``http://``, and every
artifact landing in the server's store: neither side writes or reads a shared volume."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from forecaster.scenarios import gpu_inference_demand
from serving.engine.models import MlflowRegistry
from tests.deploy.rendered import container, one, render
from tests.serving.support import free_port
from training.config import parse_config
from training.pipeline import Outcome, run_training

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

NAME = "prewarm-forecaster"


def _server_args(tmp: Path, port: int) -> list[str]:
    """The rendered MLflow container's command, pointed at ``tmp`` and ``port``."""
    server = container(one(render("."), "Deployment", "mlflow"))
    moved = {
        "--host": "127.0.0.1",
        "--port": str(port),
        "--backend-store-uri": f"sqlite:///{tmp / 'mlflow.db'}",
        "--artifacts-destination": str(tmp / "artifacts"),
    }
    args = []
    for arg in server["args"]:
        flag, eq, _value = arg.partition("=")
        args.append(f"{flag}={moved.pop(flag)}" if eq and flag in moved else arg)
    assert not moved, f"the Deployment no longer sets {sorted(moved)}"
    return [str(Path(sys.executable).parent / server["command"][0]), *args]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    store = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = (store / "server.log").open("w")
    process = subprocess.Popen(
        _server_args(store, port), stdout=log, stderr=subprocess.STDOUT, cwd=store
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240  # a hang guard: the first start migrates the schema
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"mlflow server exited:\n{(store / 'server.log').read_text()[-3000:]}")
            try:
                if httpx.get(f"{uri}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "mlflow server did not answer /health"
            time.sleep(0.5)
        yield uri, store
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_training_registers_and_serving_loads_over_http_only(
    server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, store = server
    frame = gpu_inference_demand(
        days=4, step=300, seed=3, series="chat", base_rate=20.0, bursts_per_day=0
    )
    frame.to_csv(tmp_path / "demand.csv", index=False)
    work = tmp_path / "work"  # the training pod's working directory
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = parse_config(
        {
            "source": {"type": "file", "path": str(tmp_path / "demand.csv")},
            "workloads": [
                {"name": "chat", "capacity": {"capacity_per_replica": 4, "cold_start": "10m"}}
            ],
            "model": {"name": "lightgbm", "params": {"n_estimators": 20}},
            "evaluation": {"window": "1d", "train_window": "3d", "policies": ["predictive"]},
            "mlflow": {"tracking_uri": uri, "registered_model": NAME},
        }
    )
    # The allowed hosts are in force: a Host the Service does not have is refused.
    foreign = httpx.get(
        f"{uri}/api/2.0/mlflow/experiments/search?max_results=1",
        headers={"Host": "attacker.example:5000"},
        timeout=10,
    )
    assert foreign.status_code in {400, 403}, foreign.status_code

    result = run_training(config)
    assert result.outcome is Outcome.PROMOTED, result.message

    # Serving's registry, over HTTP only, loads and plans with what training registered.
    registry = MlflowRegistry(uri)
    assert registry.champion_version(NAME) == result.version
    loaded = registry.load(NAME, str(result.version))
    plan = loaded.model.plan(frame)
    assert list(plan["series"]) == ["chat"] and int(plan["desired_replicas"].iloc[0]) >= 1

    # Every artifact went through the server into its own store; the client wrote none.
    stored = [p for p in (store / "artifacts").rglob("*") if p.is_file()]
    assert any(p.name == "MLmodel" for p in stored), stored[:10]
    assert not any((work / name).exists() for name in ("mlruns", "mlartifacts", "mlflow.db")), (
        os.listdir(work)
    )
