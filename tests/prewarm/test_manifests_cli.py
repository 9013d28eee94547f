"""``prewarm manifests`` on real configs and a real (temporary) MLflow store; every rendered
built-in manifest validated offline against the Kubernetes schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner
from mlflow import MlflowClient

from forecaster.workload import WorkloadPolicy, WorkloadSpec
from prewarm.cli import cli
from prewarm.manifests import TOLERANCE_NOTE
from training.config import load_config

# The per-HPA tolerance field exists from 1.33 (alpha); 1.35 is where it is beta and on.
KUBERNETES_VERSION = "1.35.0"
ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
source: {type: prometheus, url: "http://prometheus.monitoring.svc:9090"}
workloads:
  - name: chat
    namespace: inference
    demand: sum(rate(vllm:request_success_total{model_name="chat"}[5m]))
    capacity: {capacity_per_replica: 4, min_replicas: 2, max_replicas: 30}
    policy: {quantile: 0.9, target_utilization: 0.9, tolerance: 0.05}
  - name: batch
    demand: sum(rate(batch_jobs_total[5m]))
    capacity: {capacity_per_replica: 0.05, max_replicas: 8}
mlflow: {registered_model: manifests-test}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "prewarm.yaml"
    path.write_text(CONFIG)
    return path


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["manifests", *args])


def _load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(path.read_text())
    return document


def _register_champion(folder: Path, policies: dict[str, WorkloadPolicy]) -> str:
    """A store whose champion version's run carries ``policies.json``, as training registers
    it; returns the store's URI."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    experiment = client.create_experiment("manifests", (folder / "mlartifacts").as_uri())
    run = client.create_run(experiment)
    client.log_dict(run.info.run_id, {k: p.to_dict() for k, p in policies.items()}, "policies.json")
    client.set_terminated(run.info.run_id)
    client.create_registered_model("manifests-test")
    version = client.create_model_version(
        "manifests-test", f"{run.info.artifact_uri}/model", run_id=run.info.run_id
    )
    client.set_registered_model_alias("manifests-test", "champion", version.version)
    return uri


def test_without_a_store_the_config_policies_are_rendered_and_valid(
    config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = _run(
        "--config",
        str(config),
        "--out",
        str(out),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'absent.db'}",
    )
    assert result.exit_code == 0, result.output
    assert "no registered policies" in result.output
    assert f"Wrote {out / 'chat.hpa.yaml'}" in result.output
    assert not (tmp_path / "absent.db").exists()  # reading never creates a store
    chat, batch = _load(out / "chat.hpa.yaml"), _load(out / "batch.hpa.yaml")
    for document in (chat, batch):
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    # Each in its workload's namespace, the only one its metric is served under.
    assert (chat["metadata"]["namespace"], batch["metadata"]["namespace"]) == (
        "inference",
        "default",
    )
    forecast, demand = chat["spec"]["metrics"]
    assert forecast["external"]["metric"] == {
        "name": "prewarm_forecast_demand",
        "selector": {"matchLabels": {"workload": "chat"}},
    }
    assert forecast["external"]["target"]["averageValue"] == "3200m"  # 4 x 0.8
    assert demand["object"]["metric"] == {"name": "workload_demand"}
    assert demand["object"]["target"]["averageValue"] == "3600m"  # 4 x 0.9
    assert chat["spec"]["behavior"]["scaleDown"]["tolerance"] == "50m"
    assert chat["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert TOLERANCE_NOTE in (out / "chat.hpa.yaml").read_text()
    # the default tolerance is left to the controller: no field, so no version requirement
    assert "tolerance" not in batch["spec"]["behavior"]["scaleUp"]
    assert TOLERANCE_NOTE not in (out / "batch.hpa.yaml").read_text()
    assert batch["spec"]["metrics"][1]["object"]["target"]["averageValue"] == "40m"


def test_the_champions_registered_policies_win_over_the_config(
    config: Path, tmp_path: Path
) -> None:
    policies = dict(load_config(config).policies)
    policies["chat"] = WorkloadPolicy(
        WorkloadSpec(capacity_per_replica=4.0, min_replicas=2, max_replicas=30),
        quantile=0.5,
        forecast_utilization=1.0,
        target_utilization=1.0,
        tolerance=0.0,
    )
    uri = _register_champion(tmp_path, policies)
    out = tmp_path / "out"
    result = _run("--config", str(config), "--out", str(out), "--tracking-uri", uri)
    assert result.exit_code == 0, result.output
    assert "policies.json of manifests-test v1 (champion)" in result.output
    chat = _load(out / "chat.hpa.yaml")
    kubernetes_validate.validate(chat, KUBERNETES_VERSION, strict=True)
    targets = [m[m["type"].lower()]["target"]["averageValue"] for m in chat["spec"]["metrics"]]
    assert targets == ["4", "4"]
    assert chat["spec"]["behavior"]["scaleUp"]["tolerance"] == "0"


def test_keda_scaled_objects_carry_the_same_numbers(config: Path, tmp_path: Path) -> None:
    out = _render(tmp_path / "out", config, tmp_path, "--kind", "keda")
    scaled = _load(out / "chat.scaledobject.yaml")
    forecast, demand = scaled["spec"]["triggers"]
    assert forecast["metadata"]["valueLocation"] == "forecastDemand"
    assert float(forecast["metadata"]["targetValue"]) == pytest.approx(3.2)
    assert demand["type"] == "prometheus"
    assert demand["metadata"]["query"].startswith("sum(rate(vllm:request_success_total")
    assert float(demand["metadata"]["threshold"]) == pytest.approx(3.6)
    hpa = _load_hpa(config, tmp_path)
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior == hpa["spec"]["behavior"]
    # KEDA hands `behavior` to the HPA it creates: it must be a valid HPA behavior
    kubernetes_validate.validate(
        {**hpa, "spec": {**hpa["spec"], "behavior": behavior}}, KUBERNETES_VERSION, strict=True
    )


def _render(out: Path, config: Path, tmp_path: Path, *args: str) -> Path:
    """``prewarm manifests`` of ``config`` into ``out`` without a champion; must succeed."""
    result = _run(
        "--config", str(config), "--out", str(out), *args,
        "--tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def _load_hpa(config: Path, tmp_path: Path) -> dict[str, Any]:
    return _load(_render(tmp_path / "hpa", config, tmp_path) / "chat.hpa.yaml")


def test_keda_needs_a_prometheus_source(tmp_path: Path) -> None:
    result = _run(
        "--config",
        str(ROOT / "examples" / "demo.yaml"),
        "--kind",
        "keda",
        "--out",
        str(tmp_path),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'x.db'}",
    )
    assert result.exit_code == 2
    assert "`source.type` must be 'prometheus', got 'replay'" in result.output
    assert "Traceback" not in result.output


def test_a_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(CONFIG.replace("tolerance: 0.05", "tolerance: 1.5"))
    result = _run("--config", str(path), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "tolerance" in result.output and "1.5" in result.output
    assert not (tmp_path / "out").exists()


def test_a_measured_workload_renders_its_registered_values(tmp_path: Path) -> None:
    # `auto` in the file: only the registered policy has the measured numbers to render.
    measured = CONFIG.replace(
        "capacity: {capacity_per_replica: 4, min_replicas: 2, max_replicas: 30}",
        "capacity: {capacity_per_replica: auto, min_replicas: 2, max_replicas: 30}\n"
        "    measured: {pods: 'pod=~\"chat-.*\"'}",
    )
    assert measured != CONFIG
    path = tmp_path / "prewarm.yaml"
    path.write_text(measured)
    policies = {
        "chat": WorkloadPolicy(
            WorkloadSpec(capacity_per_replica=6.0, min_replicas=2, max_replicas=30),
            forecast_utilization=1.0,
        ),
        "batch": WorkloadPolicy(WorkloadSpec(capacity_per_replica=0.05, max_replicas=8)),
    }
    uri = _register_champion(tmp_path, policies)
    out = tmp_path / "out"
    result = _run("--config", str(path), "--out", str(out), "--tracking-uri", uri)
    assert result.exit_code == 0, result.output
    forecast, _ = _load(out / "chat.hpa.yaml")["spec"]["metrics"]
    assert forecast["external"]["target"]["averageValue"] == "6"  # 6 x 1.0, as measured
    # Without a registered policy there is no value to render: a named error.
    bare = _run(
        "--config",
        str(path),
        "--out",
        str(out),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'none.db'}",
    )
    assert bare.exit_code == 2, bare.output
    assert "capacity.capacity_per_replica is `auto`" in bare.output


def test_a_workload_that_scales_to_zero_wakes_by_the_push_trigger(tmp_path: Path) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text(CONFIG.replace("max_replicas: 8}", "max_replicas: 8, min_replicas: 0}"))
    out = _render(tmp_path / "out", path, tmp_path, "--kind", "keda")
    batch = _load(out / "batch.scaledobject.yaml")["spec"]
    # The activation phase the backtest simulated: KEDA's polling and cooldown, and the
    # external-push trigger whose StreamIsActive follows the registered activation rule.
    assert (batch["minReplicaCount"], batch["pollingInterval"], batch["cooldownPeriod"]) == (
        0,
        30,
        300,
    )
    push, demand = batch["triggers"]
    assert push["type"] == "external-push" and demand["type"] == "prometheus"
    assert push["metadata"] == {
        # `.svc`, as the metrics-api trigger: it resolves on any cluster domain
        "scalerAddress": "prewarm-serve.prewarm.svc:9000",
        "workload": "batch",
        "metric": "forecast_demand",
        "activationThreshold": "0",
    }
    assert push["authenticationRef"] == {"name": "prewarm-grpc"}
    # A workload that keeps a replica keeps the metrics-api trigger and KEDA's defaults.
    chat = _load(out / "chat.scaledobject.yaml")["spec"]
    assert chat["triggers"][0]["type"] == "metrics-api" and "pollingInterval" not in chat


def test_every_authentication_ref_names_a_trigger_authentication_rendered_beside_it(
    tmp_path: Path,
) -> None:
    # chat (inference) reads the metrics-api trigger, batch (default) and nap (inference)
    # the push one: three ScaledObjects naming two TriggerAuthentications in two namespaces
    path = tmp_path / "prewarm.yaml"
    nap = (
        "  - name: nap\n    namespace: inference\n    demand: sum(rate(nap_total[5m]))\n"
        "    capacity: {capacity_per_replica: 1, min_replicas: 0, max_replicas: 4}\n"
    )
    path.write_text(
        CONFIG.replace("max_replicas: 8}", "max_replicas: 8, min_replicas: 0}").replace(
            "mlflow:", nap + "mlflow:"
        )
    )
    out = _render(tmp_path / "out", path, tmp_path, "--kind", "keda")
    documents = [d for f in sorted(out.iterdir()) for d in yaml.safe_load_all(f.read_text())]
    auths = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): d
        for d in documents
        if d["kind"] == "TriggerAuthentication"
    }
    refs = {
        (so["metadata"]["namespace"], t["authenticationRef"]["name"])
        for so in documents
        if so["kind"] == "ScaledObject"
        for t in so["spec"]["triggers"]
        if "authenticationRef" in t
    }
    assert refs == {
        ("inference", "prewarm-bearer"),
        ("inference", "prewarm-grpc"),
        ("default", "prewarm-grpc"),
    }
    assert set(auths) == refs  # each one named is rendered, and nothing else
    assert all(a["apiVersion"] == "keda.sh/v1alpha1" for a in auths.values())
    grpc = auths["default", "prewarm-grpc"]["spec"]["secretTargetRef"]
    assert {r["parameter"]: (r["name"], r["key"]) for r in grpc} == {
        "tlsClientCert": ("prewarm-grpc-client", "tls.crt"),
        "tlsClientKey": ("prewarm-grpc-client", "tls.key"),
        "caCert": ("prewarm-grpc-client", "ca.crt"),
    }
    bearer = auths["inference", "prewarm-bearer"]["spec"]["secretTargetRef"]
    assert {r["parameter"]: (r["name"], r["key"]) for r in bearer} == {
        "token": ("prewarm-keda", "token"),
        "ca": ("prewarm-keda", "ca.crt"),
    }
    # one file per namespace, named as the workloads' are, and said in the output
    assert sorted(p.name for p in out.glob("*.triggerauthentication.yaml")) == [
        "default.triggerauthentication.yaml",
        "inference.triggerauthentication.yaml",
    ]
    assert (
        "prewarm-keda (token, ca.crt)" in (out / "inference.triggerauthentication.yaml").read_text()
    )


def test_an_hpa_names_no_trigger_authentication(config: Path, tmp_path: Path) -> None:
    out = _render(tmp_path / "out", config, tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["batch.hpa.yaml", "chat.hpa.yaml"]


def test_sharded_keda_triggers_read_the_service_of_their_shard(tmp_path: Path) -> None:
    from serving.shards import shard_of

    path = tmp_path / "prewarm.yaml"
    path.write_text(CONFIG.replace("max_replicas: 8}", "max_replicas: 8, min_replicas: 0}"))
    out = _render(tmp_path / "out", path, tmp_path, "--kind", "keda", "--shards", "4")
    chat = _load(out / "chat.scaledobject.yaml")["spec"]["triggers"][0]["metadata"]
    batch = _load(out / "batch.scaledobject.yaml")["spec"]["triggers"][0]["metadata"]
    chat_shard, batch_shard = shard_of("chat", 4), shard_of("batch", 4)
    assert chat_shard != batch_shard  # the two land apart, so the routing is visible
    assert chat["url"] == (
        f"https://prewarm-serve-{chat_shard}.prewarm.svc:443/v1/workloads/chat/forecast"
    )
    assert batch["scalerAddress"] == f"prewarm-serve-{batch_shard}.prewarm.svc:9000"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--shards", "2"), "the HPA reads the cluster's one External Metrics API Service"),
        (
            ("--kind", "keda", "--shards", "0"),
            "`--shards` must be a whole number in [1, 256], got 0",
        ),
        # `prewarm serve --shard K/N` takes no N above 256: no trigger may point past it
        (("--kind", "keda", "--shards", "257"), "in [1, 256], got 257"),
        (("--demand-metric", "a/b"), "must be a metric name the Kubernetes API accepts"),
        (("--demand-metric", ".."), "without '/' or '%'), got '..'"),
    ],
    ids=["hpa", "zero", "above-serve", "metric-slash", "metric-dots"],
)
def test_flags_the_cluster_would_refuse_are_refused_before_writing(
    config: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    result = _run(
        "--config", str(config), "--out", str(tmp_path / "out"), *args,
        "--tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()  # nothing half-written


@pytest.mark.parametrize(
    ("change", "kind", "message"),
    [
        # each was written, exit 0, and refused by the API server (or read 2,500x off)
        (("name: batch", "name: batch_jobs"), "hpa", "workload 'batch_jobs' is no Kubernetes"),
        (("name: batch", "name: a..b"), "keda", "workload 'a..b' is no Kubernetes object name"),
        (("max_replicas: 8}", "max_replicas: 8, min_replicas: 0}"), "hpa", "HPAScaleToZero"),
        (
            ("capacity_per_replica: 0.05", "capacity_per_replica: 0.00001"),
            "hpa",
            "workload 'batch': a target or tolerance of 8e-06 is below the 0.001 (1m)",
        ),
    ],
    ids=["underscore", "dots", "hpa-from-zero", "target-below-1m"],
)
def test_objects_the_api_server_would_refuse_are_refused_before_writing(
    tmp_path: Path, change: tuple[str, str], kind: str, message: str
) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text(CONFIG.replace(*change))
    result = _run(
        "--config", str(path), "--out", str(tmp_path / "out"), "--kind", kind,
        "--tracking-uri", f"sqlite:///{tmp_path / 'absent.db'}",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_an_empty_out_is_no_folder(config: Path, tmp_path: Path) -> None:
    # an unset shell variable wrote the manifests into the working directory
    result = _run("--config", str(config), "--out", "")
    assert result.exit_code == 2 and "--out names no folder" in result.output
