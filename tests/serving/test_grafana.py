"""The Grafana dashboard: every panel's PromQL parses (real ``promtool``) and names only
metrics prewarm exports (from the service's own registry)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.prometheus import require_binaries
from tests.serving.support import SAMPLE_WORKLOAD, exported_metric_names

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "prewarm.json"


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for item in items:
        found.append(item)
        found.extend(_panels(item.get("panels", [])))
    return found


def _variables(dashboard: dict[str, Any]) -> dict[str, str]:
    """Each template variable's value for the check: a textbox's default, a sample workload."""
    values = {}
    for variable in dashboard["templating"]["list"]:
        kind, name = variable["type"], variable["name"]
        values[name] = variable["query"] if kind == "textbox" else SAMPLE_WORKLOAD
    return values


def _substitute(expr: str, values: dict[str, str]) -> str:
    # Defaults may name other variables (the HPA defaults to $workload): substitute until
    # nothing changes, longest names first so `$workload` never eats `$workloads`.
    names = sorted(values, key=len, reverse=True)
    for _ in range(5):
        before = expr
        for name in names:
            expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
        if expr == before:
            break
    assert "$" not in expr, f"unresolved variable in {expr!r}"
    return expr


def _expressions() -> list[tuple[str, str]]:
    dashboard = _dashboard()
    values = _variables(dashboard)
    return [
        (panel["title"], _substitute(target["expr"], values))
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
    ]


def test_every_panel_has_promql_and_the_asked_for_panels_exist() -> None:
    titles = [panel["title"] for panel in _panels(_dashboard()["panels"])]
    wanted_titles = ("forecast band", "HPA", "data age", "coverage", "Model version", "Refusals")
    for wanted in (*wanted_titles, "Registry", "certificate"):
        assert any(wanted in title for title in titles), wanted
    expressions = _expressions()
    assert all(expr.strip() for _, expr in expressions)
    named = " ".join(expr for _, expr in expressions)
    assert "kube_horizontalpodautoscaler_status_current_replicas" in named
    assert "workload_demand" in named  # the demand query variable's default


def test_every_prewarm_metric_is_exported() -> None:
    exported = exported_metric_names()
    named = {
        name for _, expr in _expressions() for name in re.findall(r"\bprewarm_[a-zA-Z0-9_]+", expr)
    }
    assert named, "the dashboard names no prewarm metric"
    assert sorted(named - exported) == []


@pytest.mark.integration
def test_every_expression_parses_with_promtool(tmp_path: Path) -> None:
    binaries = require_binaries()
    rules = [
        {"record": f"dashboard:panel_{i}", "expr": expr}
        for i, (_, expr) in enumerate(_expressions())
    ]
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [binaries.promtool, "check", "rules", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
