"""The Prometheus Operator component's alerts: each rule fires on the series prewarm serve
exports when, and only when, its docs say (real ``promtool test rules``), and names only
metrics the service exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.rendered import DEPLOY
from tests.integration.prometheus import require_binaries
from tests.serving.support import exported_metric_names

RULE = DEPLOY / "components" / "prometheus-operator" / "prometheusrule.yaml"
POD = {"namespace": "prewarm", "pod": "prewarm-serve-a"}
OTHER_POD = {"namespace": "prewarm", "pod": "prewarm-serve-b"}


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(RULE.read_text())
    assert document["kind"] == "PrometheusRule"
    return [rule for group in document["spec"]["groups"] for rule in group["rules"]]


def _rule(name: str) -> dict[str, Any]:
    (rule,) = [r for r in _rules() if r["alert"] == name]
    return rule


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _expected(name: str, labels: dict[str, str], value: str = "") -> dict[str, Any]:
    """The alert ``name`` with ``labels``: its annotations are the rule's templates filled in
    with them and with ``value`` (the humanized duration), so the templating is checked too."""
    annotations = {}
    for key, template in _rule(name)["annotations"].items():
        text = template.replace("{{ $value | humanizeDuration }}", value)
        for label, given in labels.items():
            text = text.replace("{{ $labels." + label + " }}", given)
        assert "{{" not in text, f"{name}.{key}: a template the test does not fill: {text!r}"
        annotations[key] = text
    return {"exp_labels": {**labels, **_rule(name)["labels"]}, "exp_annotations": annotations}


def _case(
    series: list[dict[str, str]], checks: list[tuple[str, str, list[dict[str, Any]]]]
) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": alerts}
            for alert, at, alerts in checks
        ],
    }


def _run(tmp_path: Path, cases: list[dict[str, Any]]) -> None:
    binaries = require_binaries()
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(yaml.safe_load(RULE.read_text())["spec"]))
    tests = tmp_path / "tests.yml"
    tests.write_text(
        yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": cases})
    )
    done = subprocess.run(
        [binaries.promtool, "test", "rules", tests.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_names_only_exported_metrics() -> None:
    named = {n for rule in _rules() for n in re.findall(r"\bprewarm_[a-z0-9_]+", rule["expr"])}
    assert named, "the rules name no prewarm metric"
    assert sorted(named - exported_metric_names()) == []


@pytest.mark.integration
def test_a_workload_held_ten_minutes_on_one_replica_alerts_and_a_served_one_does_not(
    tmp_path: Path,
) -> None:
    chat = {"namespace": "prewarm", "workload": "chat"}
    series = [
        # chat: fresh on one replica, held (503) on the other from the start.
        _series("prewarm_workload_fresh", {**POD, "workload": "chat"}, "1x20"),
        _series("prewarm_workload_fresh", {**OTHER_POD, "workload": "chat"}, "0x20"),
        # embed: held for five minutes only, then served again.
        _series("prewarm_workload_fresh", {**POD, "workload": "embed"}, "0x5 1x15"),
    ]
    alert = "PrewarmWorkloadHeld"
    checks = [(alert, "9m", []), (alert, "11m", [_expected(alert, chat)])]
    _run(tmp_path, [_case(series, checks)])


@pytest.mark.integration
def test_a_registry_call_past_ten_minutes_alerts(tmp_path: Path) -> None:
    # A look-up that starts hanging at minute 1: its running time grows by 60 s a minute.
    series = [_series("prewarm_registry_call_running_seconds", POD, "0 0+60x20")]
    alert = "PrewarmRegistryNotAnswering"
    checks = [(alert, "11m", []), (alert, "12m", [_expected(alert, POD, "11m 0s")])]
    _run(tmp_path, [_case(series, checks)])


@pytest.mark.integration
def test_a_certificate_two_weeks_from_expiry_alerts_and_a_renewed_one_does_not(
    tmp_path: Path,
) -> None:
    # promtool's clock starts at the Unix epoch: time() is 60 at minute 1.
    day = 86400
    series = [
        _series("prewarm_tls_certificate_expiry_timestamp_seconds", POD, f"{10 * day}x5"),
        _series("prewarm_tls_certificate_expiry_timestamp_seconds", OTHER_POD, f"{30 * day}x5"),
    ]
    alert = "PrewarmCertificateExpiresSoon"
    checks = [(alert, "1m", [_expected(alert, POD, "9d 23h 59m 0s")])]
    _run(tmp_path, [_case(series, checks)])


@pytest.mark.integration
def test_a_version_refused_from_the_pod_s_start_alerts_until_it_loads(tmp_path: Path) -> None:
    # Refused before the first scrape (the counter would start at 1: no increase), then
    # loaded at minute 20.
    series = [_series("prewarm_model_versions_rejected", POD, "1x19 0x10")]
    alert = "PrewarmModelVersionRejected"
    checks = [(alert, "0m", [_expected(alert, POD)]), (alert, "25m", [])]
    _run(tmp_path, [_case(series, checks)])


@pytest.mark.integration
def test_refused_tls_files_alert_for_an_hour(tmp_path: Path) -> None:
    alert, metric = "PrewarmCertificateRenewalRefused", "prewarm_tls_reloads_total"
    refused = {**POD, "result": "failed"}
    series = [
        _series(metric, refused, "0x9 1x120"),  # refused once, at minute 10
        _series(metric, {**POD, "result": "loaded"}, "0 1+1x130"),  # loads alert nothing
    ]
    checks = [
        (alert, "9m", []),
        (alert, "15m", [_expected(alert, refused)]),
        (alert, "65m", [_expected(alert, refused)]),  # still, within the hour
        (alert, "75m", []),  # past the hour, with nothing refused since
    ]
    _run(tmp_path, [_case(series, checks)])
