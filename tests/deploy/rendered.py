"""The install as ``kubectl kustomize`` renders it, and lookups into the rendered objects."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
# Every directory a user applies: the default (HPA only), its overlay spelled out, KEDA.
INSTALLS = (".", "overlays/hpa", "overlays/keda")
SERVE = {"app.kubernetes.io/name": "prewarm", "app.kubernetes.io/component": "serve"}

Object = dict[str, Any]


def kustomize(directory: Path) -> list[Object]:
    """``kubectl kustomize directory``, parsed; fails the test with kubectl's message."""
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is needed to render deploy/ (kubectl kustomize)")
    done = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@cache
def _rendered(install: str) -> tuple[Object, ...]:
    return tuple(kustomize(DEPLOY / install))


def render(install: str) -> list[Object]:
    """The objects of ``deploy/<install>`` (rendered once per test session)."""
    return list(_rendered(install))


def named(objects: list[Object], kind: str, name: str | None = None) -> list[Object]:
    """The objects of ``kind`` (and ``name`` when given)."""
    return [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objects: list[Object], kind: str, name: str | None = None) -> Object:
    """The single object of ``kind`` (and ``name``); fails when there are none or several."""
    found = named(objects, kind, name)
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in the render"
    return found[0]


def pod_spec(workload: Object) -> Object:
    """The pod spec of a Deployment or a CronJob."""
    spec = workload["spec"]
    template = (spec["jobTemplate"]["spec"] if workload["kind"] == "CronJob" else spec)["template"]
    return dict(template["spec"])


def container(workload: Object) -> Object:
    """The only container of a Deployment's or a CronJob's pod."""
    (only,) = pod_spec(workload)["containers"]
    return dict(only)
