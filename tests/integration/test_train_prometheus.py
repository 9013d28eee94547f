"""``prewarm train`` against Prometheus: a real backfilled server, and injected failures.

The happy path pulls two workloads (a vLLM counter with a reset and a gap, a GPU-utilization
gauge as covariate) from a real server in several chunks and registers a champion. Each
failure (server down, slow, HTTP 500, malformed JSON, a query with no series) must exit with
the data-source code, name the workload and the query, and register nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.train import EXIT_DATA
from tests.integration.prometheus import Counter, Gauge, free_port
from tests.integration.test_prometheus_failures import Behaviour, FakePrometheus, Reply, json_reply
from training.registry import champion_version, load_champion

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STEP = 60
END = 1_767_225_600  # 2026-01-01T00:00:00Z
DAYS = 3
CHAT = 'sum(rate(vllm:request_success_total{model_name="chat"}[5m]))'
CODE = 'sum(rate(vllm:request_success_total{model_name="code"}[5m]))'
GPU = 'avg(DCGM_FI_DEV_GPU_UTIL{pod=~"%s-.*"})'


def counter_points(
    rate: np.ndarray, start: int, reset_at: int, gap: slice
) -> list[tuple[float, float]]:
    """A request counter growing at ``rate``/s that restarts from zero at ``reset_at``."""
    total, points = 0.0, []
    for i, r in enumerate(rate):
        total = 0.0 if i == reset_at else total + float(r) * STEP
        if gap.start <= i < gap.stop:
            continue  # the exporter was unreachable
        points.append((float(start + i * STEP), round(total, 3)))
    return points


@pytest.fixture(scope="module")
def server(prometheus_factory: Callable[..., Any]) -> Any:
    start = END - DAYS * 86400
    series_c, series_g = [], []
    for seed, name, base in ((1, "chat", 30.0), (2, "code", 8.0)):
        frame = gpu_inference_demand(
            days=DAYS, step=STEP, seed=seed, base_rate=base, bursts_per_day=0
        )
        rate = frame["value"].to_numpy()
        series_c.append(
            (
                {"model_name": name, "engine": "0"},
                counter_points(rate, start, reset_at=1500, gap=slice(2000, 2030)),
            )
        )
        util = np.clip(rate / rate.max() * 90, 0, 100)
        series_g.append(
            (
                {"pod": f"{name}-0", "gpu": "0"},
                [(float(start + i * STEP), round(float(u), 2)) for i, u in enumerate(util)],
            )
        )
    return prometheus_factory([Counter("vllm:request_success", series_c),
                               Gauge("DCGM_FI_DEV_GPU_UTIL", series_g)])  # fmt: skip


def write_config(tmp_path: Path, url: str, **source: Any) -> Path:
    document = {
        "source": {"type": "prometheus", "url": url, "step": "1m", "lookback": f"{DAYS}d",
                   "end": "2026-01-01T00:00:00Z", "retries": 0,
                   "max_points_per_request": 1500, **source},
        "workloads": [
            {"name": "chat", "demand": CHAT, "covariates": {"gpu_util": GPU % "chat"},
             "capacity": {"capacity_per_replica": 5, "cold_start": "5m", "max_replicas": 50}},
            {"name": "code", "demand": CODE, "covariates": {"gpu_util": GPU % "code"},
             "capacity": {"capacity_per_replica": 2, "cold_start": "3m", "max_replicas": 50}},
        ],
        "model": {"params": {"n_estimators": 30, "learning_rate": 0.2},
                  "features": {"scale_window": "2h", "seasonal_lags": ["1d"]}},
        "evaluation": {"window": "12h", "train_window": "2d", "policies": ["predictive"]},
        "validation": {"min_history": "1d"},
        "gate": {"coverage_tolerance": 0.5},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                   "registered_model": "prom"},
    }  # fmt: skip
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def train(path: Path) -> Any:
    return CliRunner().invoke(cli, ["train", "--config", str(path), "--no-progress"])


def nothing_registered(tmp_path: Path) -> bool:
    database = tmp_path / "mlflow.db"
    if not database.exists():
        return True
    uri = f"sqlite:///{database}"
    return not MlflowClient(tracking_uri=uri, registry_uri=uri).search_registered_models()


def test_pipeline_pulls_real_prometheus_in_chunks_and_registers_a_champion(
    server: Any, tmp_path: Path
) -> None:
    # Prometheus without auth ignores the user and password the URL sends as basic auth
    url = server.url.replace("http://", "http://prewarm:s3cretPW@")
    outcome = train(write_config(tmp_path, url))
    assert outcome.exit_code == 0, outcome.output
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert champion_version("prom", uri) == "1"
    loaded = load_champion("prom", uri)
    assert loaded.model.covariates == ("gpu_util",)
    assert loaded.step == STEP
    run = MlflowClient(tracking_uri=uri).get_run(str(loaded.run_id))
    assert run.data.params["data.start"].startswith("2025-12-29T00:00")
    assert run.data.tags["prewarm.source"] == "prometheus"
    # 3 days at 1m with 1,500 points per request: each query needed several chunks.
    assert "pulling 2 workloads from prometheus" in outcome.output
    # the run's resolved config, which every analyst in the MLflow UI reads, has no password
    resolved = MlflowClient(tracking_uri=uri).download_artifacts(
        str(loaded.run_id), "config/resolved.yaml", str(tmp_path)
    )
    text = Path(resolved).read_text()
    assert "http://***@127.0.0.1" in text
    assert "s3cretPW" not in text and "s3cretPW" not in outcome.output


@pytest.fixture
def fake() -> Iterator[Callable[[Behaviour], FakePrometheus]]:
    servers: list[FakePrometheus] = []

    def start(behaviour: Behaviour) -> FakePrometheus:
        started = FakePrometheus(behaviour).__enter__()
        servers.append(started)
        return started

    yield start
    for started in servers:
        started.__exit__(None, None, None)


def hang(seconds: float) -> Behaviour:
    def behaviour(params: dict[str, list[str]]) -> Reply:
        time.sleep(seconds)
        return 200, "application/json", b'{"status":"success","data":{"result":[]}}'

    return behaviour


FAILURES: dict[str, tuple[Behaviour | None, str]] = {
    "down": (None, "cannot connect"),
    "slow": (hang(3.0), "timeout"),
    "http-500": (json_reply(500, '{"status":"error","errorType":"internal","error":"boom"}'),
                 "HTTP 500"),
    "malformed-json": (json_reply(200, '{"status": "success", "data": {"resu'), "JSON"),
    "no-series": (json_reply(200, '{"status":"success","data":{"result":[]}}'),
                  "returned no series"),
}  # fmt: skip


@pytest.mark.parametrize("failure", sorted(FAILURES), ids=sorted(FAILURES))
def test_source_failure_exits_with_data_code_and_registers_nothing(
    failure: str, fake: Callable[[Behaviour], FakePrometheus], tmp_path: Path
) -> None:
    behaviour, cause = FAILURES[failure]
    url = f"http://127.0.0.1:{free_port()}" if behaviour is None else fake(behaviour).url
    outcome = train(write_config(tmp_path, url, timeout="1s"))
    assert outcome.exit_code == EXIT_DATA, outcome.output
    assert "data-source failure" in outcome.output
    assert "'chat'" in outcome.output and f"Query: {CHAT!r}" in outcome.output
    assert cause.lower() in outcome.output.lower()
    assert nothing_registered(tmp_path)


def test_query_without_series_on_a_real_server_names_workload_and_query(
    server: Any, tmp_path: Path
) -> None:
    path = write_config(tmp_path, server.url)
    document = yaml.safe_load(path.read_text())
    document["workloads"][1]["demand"] = (
        'sum(rate(vllm:request_success_total{model_name="nope"}[5m]))'
    )
    path.write_text(yaml.safe_dump(document))
    outcome = train(path)
    assert outcome.exit_code == EXIT_DATA, outcome.output
    assert "'code'" in outcome.output and "returned no series" in outcome.output
    assert nothing_registered(tmp_path)
