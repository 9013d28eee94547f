"""The training manifests validate offline against the Kubernetes schemas."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from training.config import parse_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
MANIFESTS = ["cronjob-train.yaml", "configmap-train.yaml", "secret-train.yaml"]


def documents() -> list[tuple[str, dict]]:
    out = []
    for name in MANIFESTS:
        for document in yaml.safe_load_all((DEPLOY / name).read_text()):
            if document:
                out.append((f"{name}:{document['kind']}", document))
    return out


@pytest.mark.parametrize(("label", "document"), documents(), ids=[d[0] for d in documents()])
def test_manifest_is_valid_kubernetes(label: str, document: dict) -> None:
    kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)


def test_cronjob_mounts_the_configmap_and_the_token_secret() -> None:
    cronjob = yaml.safe_load((DEPLOY / "cronjob-train.yaml").read_text().split("\n---\n")[0])
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "prewarm-train"
    assert volumes["prometheus-token"]["secret"]["secretName"] == "prewarm-prometheus"
    configmap = yaml.safe_load((DEPLOY / "configmap-train.yaml").read_text())
    config = parse_config(yaml.safe_load(configmap["data"]["train.yaml"]))
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert str(config.source.bearer_token_file).startswith(mounts["prometheus-token"])  # type: ignore[union-attr]
    assert pod["containers"][0]["args"][:3] == ["train", "--config", "/etc/prewarm/train.yaml"]
