"""``prewarm demo`` end to end: training, the local MLflow store, the report and its plots,
and the same numbers under another clock (the replay moves by whole weeks only).

The run is the ``demo_run`` fixture (``conftest.py``). Its tests share one file, so that
``make test``'s workers (one file each at a time) make it once."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pandas as pd
import pytest

from forecaster.backtest.tuning import TUNING_MARGIN, rule_text
from prewarm.demo import DEMO_CONFIG, run_demo
from tests.prewarm.conftest import CLOCKS, fixed

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_summary_names_savings_and_next_commands(demo_run):
    report, uri, output = demo_run
    summary = json.loads((report / "summary.json").read_text())
    for name, numbers in summary["workloads"].items():
        (line,) = [line for line in output.splitlines() if line.startswith(f"{name}: ")]
        deployed = numbers["deployed"]
        if not deployed["hybrid"]["meets_slo"]:
            assert "the served hybrid misses the 0.1% SLO out of sample" in line
            for policy, row in deployed.items():
                if policy != "oracle":
                    assert f"{policy} {row['unserved_fraction']:.2%}" in line
            continue
        assert "meets the 0.1% SLO out of sample" in line
        assert f"at cost {deployed['hybrid']['cost']:,.0f}" in line
        for policy in ("reactive", "static"):
            saving = numbers["savings"][f"vs_{policy}"]
            if saving is None:
                unserved = deployed[policy]["unserved_fraction"]
                assert f"{policy} misses the SLO ({unserved:.2%} unserved)" in line
            elif saving >= 0:
                assert f"saves {saving:.1%} vs {policy}" in line
            else:
                assert f"costs {-saving:.1%} more than {policy}" in line
    for text in (output, (report / "README.md").read_text()):
        assert "n/a" not in text and "None" not in text
    assert f"ui --backend-store-uri {uri}" in output
    assert f"serve --config examples/demo.yaml --tracking-uri {uri}" in output
    assert "labelSelector=workload%3D" in output


def test_the_summary_is_the_deployed_out_of_sample_numbers(demo_run):
    report, _, _ = demo_run
    summary = json.loads((report / "summary.json").read_text())
    text = (report / "README.md").read_text()
    # the report says which rule tuned the settings: the config's (default) margin
    assert summary["tuning_margin"] == TUNING_MARGIN
    assert f"its cheapest that {rule_text(TUNING_MARGIN)} on the first half" in text
    for name, numbers in summary["workloads"].items():
        document = json.loads((report / name / "backtest.json").read_text())
        deployed = document["deployed"]
        assert numbers["savings"] == deployed["savings"]
        assert deployed["tuning_margin"] == summary["tuning_margin"]
        assert deployed["tuning"]["end"] == deployed["validation"]["start"]
        hybrid = deployed["policies"]["hybrid"]
        assert numbers["served_settings"] == hybrid["settings"]
        if hybrid["meets_slo"] and deployed["policies"]["reactive"]["meets_slo"]:
            reactive = deployed["policies"]["reactive"]["cost"]
            assert numbers["savings"]["vs_reactive"] == 1 - hybrid["cost"] / reactive


def test_next_commands_name_programs_that_run_from_a_fresh_shell(demo_run):
    """The printed programs are this environment's, by a path that works without activation."""
    import shutil

    _, _, output = demo_run
    for program in ("mlflow", "prewarm"):
        (line,) = [
            line for line in output.splitlines() if f"{program} " in line and "  " in line[:2]
        ]
        command = line.split()[0]
        if "/" in command:
            assert (Path.cwd() / command).is_file(), line
        else:
            assert shutil.which(command) is not None, line


def test_local_store_has_one_run_and_a_champion(demo_run):
    from mlflow import MlflowClient

    _, uri, _ = demo_run
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("prewarm")
    assert len(client.search_runs([experiment.experiment_id])) == 1
    versions = client.search_model_versions("name='prewarm-demo'")
    assert [str(v.version) for v in versions] == ["1"]
    assert str(client.get_model_version_by_alias("prewarm-demo", "champion").version) == "1"


def test_the_run_keeps_the_tuning_verdicts_the_demo_printed(demo_run, tmp_path):
    from mlflow import MlflowClient

    report, uri, _ = demo_run
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(client.get_model_version("prewarm-demo", "1").run_id)
    summary = json.loads((report / "summary.json").read_text())["workloads"]
    kept = json.loads(
        Path(
            client.download_artifacts(run.info.run_id, "tuning/deployed.json", str(tmp_path))
        ).read_text()
    )
    assert sorted(kept) == sorted(summary)
    for name, numbers in summary.items():
        assert kept[name]["policies"]["hybrid"]["settings"] == numbers["served_settings"]
        assert kept[name]["savings"] == numbers["savings"]
    dearer = [n for n, numbers in summary.items() if (numbers["savings"]["vs_reactive"] or 0) < 0]
    assert run.data.metrics["tuning.workloads"] == len(summary)
    assert run.data.metrics["tuning.dearer_than_reactive"] == len(dearer)


def test_report_files_and_consistent_numbers(demo_run):
    report, _, _ = demo_run
    summary = json.loads((report / "summary.json").read_text())
    assert set(summary["workloads"]) == {"google-cluster", "viral-launch"}
    assert (report / "README.md").read_text().startswith("# prewarm demo")
    for name in summary["workloads"]:
        document = json.loads((report / name / "backtest.json").read_text())
        assert (report / name / "backtest.md").stat().st_size > 0
        oracle = document["policies"]["oracle"]
        # The oracle serves every step on arrival. It is the lower bound among policies that
        # never queue; one that lets work wait up to the SLO latency can undercut it.
        assert oracle["meets_slo"] and oracle["unserved_fraction"] == 0.0
        for policy, numbers in document["policies"].items():
            assert numbers["replica_hours"] > 0 and numbers["cost"] > 0, policy
        assert document["savings_at_slo"] == summary["workloads"][name]["in_sample_savings_at_slo"]


def test_plots_are_images_of_the_expected_size(demo_run):
    report, _, _ = demo_run
    for name in ("google-cluster", "viral-launch"):
        # 11 x (2.2 per policy + 0.6) inches for the 7 policies, and 8 x 5 inches, at 110 dpi.
        assert png_size(report / name / "capacity.png") == (1210, 1760)
        assert png_size(report / name / "frontier.png") == (880, 550)
        assert (report / name / "capacity.png").stat().st_size > 20_000


def test_serve_on_the_demo_config_answers_the_external_metric(demo_run):
    """The README's next step: `prewarm serve --config examples/demo.yaml`, then curl."""
    import subprocess
    import sys
    import time

    import httpx

    from prewarm.demo import DEMO_CONFIG
    from tests.integration.prometheus import free_port

    report, uri, _ = demo_run
    summary = json.loads((report / "summary.json").read_text())
    port, grpc_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prewarm", "serve", "--config", str(DEMO_CONFIG),
         "--port", str(port), "--grpc-port", str(grpc_port), "--tracking-uri", uri],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = (
        f"http://127.0.0.1:{port}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/"
        "prewarm_desired_replicas?labelSelector=workload%3Dviral-launch"
    )
    try:
        deadline, answer = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            try:
                answer = httpx.get(url, timeout=2)
                if answer.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        assert answer is not None and answer.status_code == 200, answer and answer.text
        body = answer.json()
        assert body["kind"] == "ExternalMetricValueList"
        (item,) = body["items"]
        assert item["metricLabels"] == {"workload": "viral-launch"}
        # The served answer is planned with the tuned, backtested configuration.
        forecast = httpx.get(
            f"http://127.0.0.1:{port}/v1/workloads/viral-launch/forecast", timeout=5
        ).json()
        served = summary["workloads"]["viral-launch"]["served_settings"]
        assert forecast["quantile"] == served["quantile"]
        capacity = 0.2  # examples/demo.yaml: viral-launch's capacity_per_replica
        assert forecast["demandTarget"] == pytest.approx(capacity * served["forecast_utilization"])
        expected = math.ceil(forecast["forecastDemand"] / forecast["demandTarget"] - 1e-9)
        assert int(item["value"]) == forecast["desiredReplicas"] == min(max(expected, 1), 60)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _documents(report: Path) -> tuple[dict, dict]:
    summary = json.loads((report / "summary.json").read_text())
    documents = {
        name: json.loads((report / name / "backtest.json").read_text())
        for name in summary["workloads"]
    }
    return summary, documents


def test_demo_training_and_backtest_do_not_depend_on_the_clock(demo_run, tmp_path):
    """The shared demo run (its replay at ``CLOCKS[0]``) against one at ``CLOCKS[1]``."""
    first_report, _, _ = demo_run
    run_demo(DEMO_CONFIG, tmp_path / "report", f"sqlite:///{tmp_path / 'mlflow.db'}",
             clock=fixed(CLOCKS[1]))  # fmt: skip
    runs = [_documents(first_report), _documents(tmp_path / "report")]
    (first, first_docs), (second, second_docs) = runs
    assert first["training"] == second["training"]
    for name, numbers in first["workloads"].items():
        other = second["workloads"][name]
        spans = ("tuning", "validation")
        assert {k: v for k, v in numbers.items() if k not in spans} == {
            k: v for k, v in other.items() if k not in spans
        }, name
        for span in spans:  # the same windows of the recording, moved by whole weeks
            for edge in ("start", "end"):
                moved = pd.Timestamp(other[span][edge]) - pd.Timestamp(numbers[span][edge])
                assert moved > pd.Timedelta(0) and moved % pd.Timedelta(days=7) == pd.Timedelta(0)
    for name, document in first_docs.items():
        other = second_docs[name]
        assert document["policies"] == other["policies"], name
        assert document["frontier"] == other["frontier"], name
        # The same span of the recording, moved by whole weeks.
        moved = pd.Timestamp(other["evaluation"]["start"]) - pd.Timestamp(
            document["evaluation"]["start"]
        )
        assert moved.total_seconds() % (7 * 86400) == 0 and moved.total_seconds() > 0
        assert document["evaluation"]["hours"] == other["evaluation"]["hours"]
