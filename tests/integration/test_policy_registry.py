"""The policy a workload is trained with is the one registered, loaded and served.

One tiny training run into a real MLflow SQLite store in a temp dir, with a policy override
(as a backtest's tuning passes it): the registered ``policies.json``, the run's params, the
model serve loads from the registry, and the answers of a real uvicorn and gRPC server all
carry that policy. A serve config that disagrees with it is refused for that workload only,
field by field, in the log, ``/v1/workloads``, ``/metrics`` and on every metric endpoint
(``/readyz`` names the category).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import httpx
import pandas as pd
import pytest
from mlflow import MlflowClient

from forecaster.scenarios import gpu_inference_demand
from serving.api.app import create_app, uvicorn_config
from serving.api.runtime import ServingComponents
from serving.engine.models import MlflowRegistry
from serving.settings import ServingSettings, refresh_config_from_project
from serving.wire.stubs import load_externalscaler
from tests.serving.support import FrameSource, free_port, running, wait_until
from training.config import TrainConfig, parse_config
from training.pipeline import TrainResult, run_training
from training.registry import load_model_version
from training.tracking import registered_policies

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

NAME = "policy-forecaster"
STEP = 300
GROUP = "/apis/external.metrics.k8s.io/v1beta1"


def _frame() -> pd.DataFrame:
    """Three days of two workloads, ending at the last whole step before now, so that a
    server reading it considers it fresh."""
    parts = [
        gpu_inference_demand(days=3, step=STEP, seed=3, series="chat", base_rate=40.0),
        gpu_inference_demand(days=3, step=STEP, seed=4, series="embed", base_rate=9.0),
    ]
    frame = pd.concat(parts, ignore_index=True)
    end = pd.Timestamp.now(tz="UTC").floor(f"{STEP}s")
    stamps = pd.to_datetime(frame["timestamp"], utc=True)
    frame["timestamp"] = stamps + (end - stamps.max())
    return frame


def _config(root: Path, chat_policy: dict[str, Any], embed_capacity: float = 2.0) -> TrainConfig:
    return parse_config(
        {
            "source": {"type": "file", "path": str(root / "demand.csv")},
            "workloads": [
                {"name": "chat", "policy": chat_policy,
                 "capacity": {"capacity_per_replica": 8, "cold_start": "10m", "quantile": 0.9}},
                {"name": "embed",
                 "capacity": {"capacity_per_replica": embed_capacity, "cold_start": "5m",
                              "quantile": 0.9}},
            ],
            "model": {"name": "lightgbm",
                      "params": {"n_estimators": 10, "num_leaves": 7},
                      "features": {"lags": [0, 1, 2], "windows": ["30m"], "seasonal_lags": ["1d"]}},
            "evaluation": {"window": "6h", "train_window": "2d", "policies": ["predictive"]},
            "gate": {"coverage_tolerance": 1.0},
            "mlflow": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "experiment": "policy",
                       "registered_model": NAME},
            "serving": {"refresh_interval": 1, "max_staleness": "2h", "poll_model_every": 1},
        }
    )  # fmt: skip


class Trained:
    def __init__(self, root: Path, frame: pd.DataFrame, result: TrainResult, tuned: Any) -> None:
        self.root, self.frame, self.result, self.tuned = root, frame, result, tuned
        self.uri = f"sqlite:///{root / 'mlflow.db'}"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    root = tmp_path_factory.mktemp("policy-registry")
    frame = _frame()
    frame.to_csv(root / "demand.csv", index=False)
    config = _config(root, {"hold": "5m"})
    # Tuned as a backtest would: another quantile and forecast utilization for chat.
    tuned = {
        **config.policies,
        "chat": config.policies["chat"].tuned(quantile=0.6, forecast_utilization=1.0),
    }
    result = run_training(config, policies=tuned)
    assert result.version is not None and result.model is not None
    return Trained(root, frame, result, tuned)


def test_the_policies_are_registered_with_the_version(trained: Trained) -> None:
    version = trained.result.version
    assert version is not None
    client = MlflowClient(tracking_uri=trained.uri, registry_uri=trained.uri)
    assert registered_policies(client, NAME, version) == trained.tuned
    params = client.get_run(client.get_model_version(NAME, version).run_id).data.params
    assert params["policy.chat.quantile"] == "0.6"
    assert params["policy.chat.forecast_utilization"] == "1.0"
    assert params["policy.embed.quantile"] == "0.9"
    assert params["policy.chat.hold_seconds"] == "300.0"
    # The model plans at every policy's quantile.
    assert 0.6 in trained.result.model.forecaster.quantiles  # type: ignore[union-attr]
    loaded = load_model_version(NAME, version, trained.uri)
    assert loaded.model.policies == trained.tuned


def _serve(trained: Trained, config: TrainConfig) -> Any:
    # Planning in this process: a spawned planning child would only cost start-up time.
    refresh = replace(refresh_config_from_project(config), plan_in_process=False)
    source = FrameSource(trained.frame)
    settings = ServingSettings(port=free_port(), grpc_port=0)
    components = ServingComponents(refresh, lambda: source, MlflowRegistry(trained.uri))
    return create_app(settings, components), settings


@pytest.fixture()
def agreeing(trained: Trained) -> Iterator[tuple[Any, httpx.Client]]:
    # The file states chat's tuned quantile; what it leaves unset defers to the registry.
    app, settings = _serve(trained, _config(trained.root, {"hold": "5m", "quantile": 0.6}))
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=10) as http,
    ):
        wait_until(lambda: http.get("/readyz").json()["fresh"] == ["chat", "embed"], timeout=60)
        yield app, http


def test_serve_plans_with_exactly_the_registered_policy(
    trained: Trained, agreeing: tuple[Any, httpx.Client]
) -> None:
    app, http = agreeing
    runtime = app.state.runtime
    assert runtime.watcher.current.model.policies == trained.tuned
    answer = http.get("/v1/workloads/chat/forecast").json()
    window = runtime.refresher.window.frame(["chat"])
    plan = trained.result.model.plan(window).set_index("series").loc["chat"]
    chat = trained.tuned["chat"]
    assert answer["desiredReplicas"] == int(plan["desired_replicas"])
    assert answer["forecastDemand"] == pytest.approx(float(plan["forecast_demand"]))
    assert answer["quantile"] == chat.tau == 0.6
    assert answer["leadTimeSeconds"] == chat.lead_seconds == 600.0
    assert answer["demandTarget"] == pytest.approx(chat.forecast_target) == 8.0
    assert answer["maxReplicas"] == chat.spec.max_replicas
    scraped = http.get("/metrics").text
    assert 'prewarm_policy_drift{workload="chat"} 0.0' in scraped


@pytest.fixture()
def drifted(trained: Trained) -> Iterator[tuple[Any, httpx.Client]]:
    # The served config doubles embed's capacity per replica.
    app, settings = _serve(trained, _config(trained.root, {"hold": "5m"}, embed_capacity=4.0))
    with (
        running(app, lambda a: uvicorn_config(a, settings)),
        httpx.Client(base_url=f"http://127.0.0.1:{settings.port}", timeout=10) as http,
    ):
        wait_until(lambda: http.get("/readyz").json()["fresh"] == ["chat"], timeout=60)
        yield app, http


def test_a_drifted_workload_is_refused_field_by_field(
    trained: Trained, drifted: tuple[Any, httpx.Client]
) -> None:
    app, http = drifted
    version = trained.result.version
    reason = (
        f"workload embed: capacity_per_replica 2.0 -> 4.0 since version {version}: "
        "retrain or revert"
    )
    ready = http.get("/readyz").json()
    assert ready["ready"] is True and ready["stale"] == {"embed": "drift"}
    listed = {w["workload"]: w for w in http.get("/v1/workloads").json()["workloads"]}
    assert listed["embed"]["reason"] == reason
    scraped = http.get("/metrics").text
    assert 'prewarm_policy_drift{workload="embed"} 1.0' in scraped
    assert 'prewarm_policy_drift{workload="chat"} 0.0' in scraped
    # The metric answers what stale data answers: 503 ServiceUnavailable, gRPC UNAVAILABLE.
    metric = f"{GROUP}/namespaces/default/prewarm_desired_replicas?labelSelector=workload%3D"
    refused = http.get(metric + "embed")
    assert refused.status_code == 503, refused.text
    assert refused.json()["reason"] == "ServiceUnavailable"
    assert reason in refused.json()["message"]
    assert http.get("/v1/workloads/embed/forecast").status_code == 503
    assert http.get(metric + "chat").status_code == 200
    assert http.get("/v1/workloads/chat/forecast").json()["quantile"] == 0.6
    stubs = load_externalscaler()
    pb2 = stubs.pb2
    with grpc.insecure_channel(f"127.0.0.1:{app.state.runtime.grpc_port}") as channel:
        stub = stubs.pb2_grpc.ExternalScalerStub(channel)
        ref = pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "embed"})
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetMetrics(pb2.GetMetricsRequest(scaledObjectRef=ref), timeout=5)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        chat = pb2.ScaledObjectRef(name="so", scalerMetadata={"workload": "chat"})
        assert stub.GetMetrics(pb2.GetMetricsRequest(scaledObjectRef=chat), timeout=5)


def test_drift_is_logged_once_with_its_fields(
    trained: Trained, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="serving.engine.refresher")
    app, settings = _serve(trained, _config(trained.root, {"hold": "10m"}))
    with running(app, lambda a: uvicorn_config(a, settings)):
        runtime = app.state.runtime
        wait_until(lambda: runtime.refresher.ticks >= 3, timeout=60)
    warnings = [r for r in caplog.records if r.getMessage().startswith("policy drift")]
    assert len(warnings) == 1
    (record,) = warnings
    assert record.levelno == logging.WARNING
    assert record.__dict__["workload"] == "chat"
    assert record.__dict__["model_version"] == trained.result.version
    assert record.__dict__["reason"] == (
        f"workload chat: hold 300.0 -> 600.0 since version {trained.result.version}: "
        "retrain or revert"
    )
