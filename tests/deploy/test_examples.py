"""The per-workload examples in deploy/examples (what `prewarm manifests` renders for the
example workload): built-in kinds validated offline against the Kubernetes schemas, KEDA
kinds parsed and checked against what the service serves. The install itself is
tests/deploy/test_kustomize.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from prewarm.manifests import TRIGGER_AUTHS, Kind, Policies, render
from training.config import load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "examples"
BASE_CONFIG = DEPLOY.parent / "base" / "prewarm.yaml"
INSTALL_MD = DEPLOY.parents[1] / "docs" / "install.md"
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
AUTHS = [(name, doc) for name, doc in KEDA if doc["kind"] == "TriggerAuthentication"]


def _kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in DOCUMENTS if doc["kind"] == kind]


def test_every_expected_kind_is_there() -> None:
    kinds = {doc["kind"] for _, doc in DOCUMENTS}
    assert kinds == {"HorizontalPodAutoscaler", "ScaledObject", "TriggerAuthentication"}


@pytest.mark.parametrize(("name", "doc"), BUILT_IN, ids=[n for n, _ in BUILT_IN])
def test_built_in_kinds_validate_offline(name: str, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize(("kind", "file"), [("hpa", "hpa.yaml"), ("keda", "keda-metrics-api.yaml")])
def test_the_examples_are_what_prewarm_manifests_renders(kind: Kind, file: str) -> None:
    # The autoscaler the backtest simulates for the install's example workload (and, with
    # KEDA, the TriggerAuthentication it names), nothing else.
    config = load_config(BASE_CONFIG)
    rendered = render(config, Policies(config.policies, "the config"), kind, "workload_demand")
    expected = [d for text in rendered.values() for d in yaml.safe_load_all(text)]
    example = [d for d in yaml.safe_load_all((DEPLOY / file).read_text()) if d]
    assert sorted(example, key=_key) == sorted(expected, key=_key)


def _key(document: dict[str, Any]) -> str:
    return f"{document['kind']}/{document['metadata']['name']}"


@pytest.mark.parametrize(("name", "doc"), AUTHS, ids=[n for n, _ in AUTHS])
def test_each_example_trigger_authentication_is_the_one_manifests_renders(
    name: str, doc: dict[str, Any]
) -> None:
    auth = TRIGGER_AUTHS[doc["metadata"]["name"]]
    assert doc == auth.manifest(doc["metadata"]["namespace"])


@pytest.mark.parametrize(("name", "doc"), KEDA, ids=[n for n, _ in KEDA])
def test_keda_objects_parse(name: str, doc: dict[str, Any]) -> None:
    assert doc["apiVersion"] == "keda.sh/v1alpha1"
    if doc["kind"] == "ScaledObject":
        spec = doc["spec"]
        assert spec["scaleTargetRef"]["name"]
        # A fallback would turn a failing forecast into a replica count that can scale the
        # fleet down; without one a failing metric makes the HPA hold.
        assert "fallback" not in spec
        for trigger in spec["triggers"]:
            assert all(isinstance(v, str) for v in trigger["metadata"].values()), trigger


def test_keda_triggers_point_at_what_prewarm_serves() -> None:
    triggers = [t for so in _kind("ScaledObject") for t in so["spec"]["triggers"]]
    by_type = {t["type"]: t for t in triggers}
    api = by_type["metrics-api"]["metadata"]
    assert api["url"].endswith("/forecast") and "/v1/workloads/" in api["url"]
    assert api["valueLocation"] == "forecastDemand"
    assert by_type["metrics-api"]["metricType"] == "AverageValue"  # KEDA's fallback needs it
    push = by_type["external-push"]["metadata"]
    assert push["scalerAddress"].endswith(":9000") and push["workload"]


@pytest.mark.parametrize(
    ("file", "trigger", "keys"),
    [
        ("keda-metrics-api.yaml", "metrics-api", {"token": "token", "ca": "ca.crt"}),
        (
            "keda-external.yaml",
            "external-push",
            {"tlsClientCert": "tls.crt", "tlsClientKey": "tls.key", "caCert": "ca.crt"},
        ),
    ],
)
def test_each_keda_trigger_authenticates_with_keys_its_secret_is_made_with(
    file: str, trigger: str, keys: dict[str, str]
) -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / file).read_text()) if d]
    (auth,) = [d for d in docs if d["kind"] == "TriggerAuthentication"]
    (used,) = [
        t
        for d in docs
        if d["kind"] == "ScaledObject"
        for t in d["spec"]["triggers"]
        if t["type"] == trigger
    ]
    assert used["authenticationRef"]["name"] == auth["metadata"]["name"]
    refs = auth["spec"]["secretTargetRef"]
    assert {r["parameter"]: r["key"] for r in refs} == keys
    (secret,) = {r["name"] for r in refs}
    # The Secret is made from the install's own, never committed with a placeholder:
    # docs/install.md holds the command (tests/deploy/test_install_secrets.py runs it).
    assert "kind: Secret" not in (DEPLOY / file).read_text()
    assert f"create secret generic {secret} " in INSTALL_MD.read_text()
