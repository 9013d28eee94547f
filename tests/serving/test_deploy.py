"""The serving manifests: built-in kinds validated offline against the Kubernetes schemas,
KEDA kinds parsed and checked against what the service serves."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from serving.wire import k8s

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "serving"
KUBERNETES_VERSION = "1.30.0"
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return docs


DOCUMENTS = _documents()
BUILT_IN = [(name, doc) for name, doc in DOCUMENTS if doc["kind"] not in KEDA_KINDS]
KEDA = [(name, doc) for name, doc in DOCUMENTS if doc["kind"] in KEDA_KINDS]


def _kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCUMENTS if doc["kind"] == kind]


def test_every_expected_kind_is_there() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    for kind in (
        "Deployment",
        "Service",
        "APIService",
        "ServiceAccount",
        "ClusterRoleBinding",
        "RoleBinding",
        "HorizontalPodAutoscaler",
        "ConfigMap",
        "ScaledObject",
        "TriggerAuthentication",
    ):
        assert kind in kinds, kind


@pytest.mark.parametrize(("name", "doc"), BUILT_IN, ids=[n for n, _ in BUILT_IN])
def test_built_in_kinds_validate_offline(name: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_deployment_is_locked_down() -> None:
    (deployment,) = _kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"requests", "limits"} <= set(container["resources"])
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_apiservice_registers_the_group_with_a_ca_bundle() -> None:
    (api,) = _kind("APIService")
    assert api["metadata"]["name"] == f"{k8s.VERSION}.{k8s.GROUP}"
    spec = api["spec"]
    assert (spec["group"], spec["version"]) == (k8s.GROUP, k8s.VERSION)
    assert "insecureSkipTLSVerify" not in spec
    assert base64.b64decode(spec["caBundle"]).startswith(b"-----BEGIN CERTIFICATE-----")
    (service,) = _kind("Service")
    assert spec["service"]["name"] == service["metadata"]["name"]
    assert spec["service"]["port"] in {p["port"] for p in service["spec"]["ports"]}


def test_rbac_for_the_aggregator() -> None:
    roles = {doc["roleRef"]["name"] for doc in _kind("ClusterRoleBinding") + _kind("RoleBinding")}
    assert {"system:auth-delegator", "extension-apiserver-authentication-reader"} <= roles
    (reader,) = [d for d in _kind("RoleBinding") if d["roleRef"]["kind"] == "Role"]
    assert reader["metadata"]["namespace"] == "kube-system"


def test_hpa_uses_the_predictive_metric_beside_a_reactive_one() -> None:
    (hpa,) = _kind("HorizontalPodAutoscaler")
    # the reactive path reads the demand, as the backtest simulates it, not CPU
    (demand,) = [m["object"] for m in hpa["spec"]["metrics"] if m["type"] == "Object"]
    assert demand["target"]["type"] == "AverageValue"
    (external,) = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert external["metric"]["name"] == k8s.METRIC_DESIRED_REPLICAS
    assert "workload" in external["metric"]["selector"]["matchLabels"]
    assert external["target"] == {"type": "AverageValue", "averageValue": "1"}


@pytest.mark.parametrize(("name", "doc"), KEDA, ids=[n for n, _ in KEDA])
def test_keda_objects_parse(name: str, doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == "keda.sh/v1alpha1"
    if doc["kind"] == "ScaledObject":
        spec = doc["spec"]
        assert spec["scaleTargetRef"]["name"]
        assert spec["fallback"]["failureThreshold"] >= 1
        for trigger in spec["triggers"]:
            assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger


def test_keda_triggers_point_at_what_prewarm_serves() -> None:
    triggers = [t for so in _kind("ScaledObject") for t in so["spec"]["triggers"]]
    by_type = {t["type"]: t for t in triggers}
    api = by_type["metrics-api"]["metadata"]
    assert api["url"].endswith("/forecast") and "/v1/workloads/" in api["url"]
    assert api["valueLocation"] == "desiredReplicas" and api["targetValue"] == "1"
    assert by_type["metrics-api"]["metricType"] == "AverageValue"  # KEDA's fallback needs it
    push = by_type["external-push"]["metadata"]
    assert push["scalerAddress"].endswith(":9000") and push["workload"]
