"""``prewarm backtest --config``: the workloads of a training config, tuned out of sample, and
the champion's registered policy scored on the same validation window; ``prewarm train
--tune`` registers the tuned one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from prewarm.cli import cli
from training.config import load_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture
def config(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    floor = getattr(request, "param", 1)  # min_replicas
    document = {
        "source": {"type": "file", "files": {"cpu": str(DATA / "google_cluster_cpu_5min.csv")},
                   "lookback": "13d"},
        "workloads": [{"name": "cpu", "capacity": {"capacity_per_replica": 0.03,
                                                    "cold_start": "5m", "max_replicas": 40,
                                                    "min_replicas": floor}}],
        "model": {"params": {"n_estimators": 20}},
        "evaluation": {"window": "1d", "train_window": "7d"},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                   "registered_model": "cfg"},
    }  # fmt: skip
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def backtest(config: Path, out: Path, *extra: str):
    return CliRunner().invoke(
        cli, ["backtest", "--config", str(config), "--json", str(out), *extra]
    )


# With min_replicas 0, the fuller case: the activation probability is tuned and registered
# too. The default floor of 1 is the demo's, whose tests check served = tuned (test_demo.py);
# the settings without an activation probability are checked in the gpu-utilization test.
@pytest.mark.parametrize("config", [0], indirect=True, ids=["min0"])
def test_scores_what_it_would_register_then_what_is_registered(config: Path, tmp_path: Path):
    first = backtest(config, tmp_path / "before.json")
    assert first.exit_code == 0, first.output
    deployed = json.loads((tmp_path / "before.json").read_text())["cpu"]["deployed"]
    assert "registered" not in deployed
    hybrid = deployed["policies"]["hybrid"]
    # Waking from zero, the activation probability is tuned with the rest and registered.
    floor = load_config(config).policies["cpu"].spec.min_replicas
    assert ("activation_probability" in hybrid["settings"]) == (floor == 0)
    for field in ("cost", "unserved_fraction", "meets_slo", "cold_starts_per_hour",
                  "scale_events_per_hour", "settings"):  # fmt: skip
        assert field in hybrid
    assert deployed["tuning"]["end"] == deployed["validation"]["start"]
    assert "served now" not in first.output

    # `prewarm train --tune` registers hybrid's out-of-sample tuned setting as the policy.
    trained = CliRunner().invoke(cli, ["train", "--config", str(config), "--tune", "--no-progress"])
    assert trained.exit_code == 0, trained.output
    tuned = {"cpu": load_config(config).policies["cpu"].tuned(**hybrid["settings"])}
    # its log says what the registered setting bought out of sample, the HPA's cost beside
    saving = deployed["savings"]["vs_reactive"]
    assert f"{saving:+.1%} vs reactive" in trained.output
    assert ("more than the tuned reactive HPA" in trained.output) == (saving < 0)
    # and the training run keeps those verdicts for the MLflow UI
    store = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = store.get_run(store.get_model_version("cfg", "1").run_id)
    kept = json.loads(Path(store.download_artifacts(run.info.run_id, "tuning/deployed.json",
                                                    str(tmp_path))).read_text())  # fmt: skip
    assert kept["cpu"]["policies"]["hybrid"]["settings"] == hybrid["settings"]
    assert run.data.metrics["tuning.workloads"] == 1
    assert run.data.metrics["tuning.meets_slo"] == float(hybrid["meets_slo"])
    assert run.data.metrics["tuning.vs_reactive"] == pytest.approx(saving)
    assert run.data.metrics["tuning.dearer_than_reactive"] == float(saving < 0)
    dearer = run.data.tags.get("prewarm.tuning.dearer_than_reactive")
    assert dearer == ("cpu" if saving < 0 else None)

    second = backtest(config, tmp_path / "after.json")
    assert second.exit_code == 0, second.output
    registered = json.loads((tmp_path / "after.json").read_text())["cpu"]["deployed"]["registered"]
    # The registered policy is the tuned one: on the same window it costs what was reported.
    assert registered["settings"] == tuned["cpu"].settings()
    assert registered["cost"] == pytest.approx(hybrid["cost"])
    assert registered["unserved_fraction"] == pytest.approx(hybrid["unserved_fraction"])
    assert "served now (policies.json of cfg v1 (champion))" in second.output


def test_bad_invocations_name_what_to_change(config: Path, tmp_path: Path):
    unknown = backtest(config, tmp_path / "x.json", "--workload", "gpu")
    assert unknown.exit_code == 2  # a config or usage error
    assert "--workload 'gpu' is not in the config; workloads: ['cpu']" in unknown.output
    both = CliRunner().invoke(cli, ["backtest", str(DATA / "nyc_taxi_passengers_30min.csv"),
                                    "--config", str(config)])  # fmt: skip
    assert both.exit_code == 2 and "give DATA or --config" in both.output
    # the margin of a config's backtest is the config's, which `train --tune` reads too
    margin = backtest(config, tmp_path / "x.json", "--tuning-margin", "0.5")
    assert margin.exit_code == 2
    assert "with --config the config sets it (evaluation.tuning_margin)" in margin.output


@pytest.mark.parametrize(
    ("flag", "where"),
    [
        (["--policies", "reactive,hybrid"], "(evaluation.policies)"),
        (["--slo-unserved", "0.01"], "(each workload's capacity.slo_unserved_fraction)"),
        (["--model", "ewma"], "(model.name)"),
        (["--value-col", "nope"], "(source.value_col)"),
        (["--peak-replicas", "10"], "(each workload's capacity.capacity_per_replica)"),
    ],
)
def test_a_flag_of_data_backtests_is_refused_with_config_not_ignored(
    config: Path, tmp_path: Path, flag: list[str], where: str
):
    result = backtest(config, tmp_path / "x.json", *flag)
    assert result.exit_code == 2
    assert f"{flag[0]} backtests DATA; with --config the config sets it {where}" in result.output
    assert not (tmp_path / "x.json").exists()  # refused before any work


@pytest.mark.parametrize("flag", [["--workload", "cpu"], ["--tracking-uri", "sqlite:///x.db"]])
def test_a_flag_of_config_backtests_is_refused_with_data(flag: list[str]):
    data = str(DATA / "nyc_taxi_passengers_30min.csv")
    result = CliRunner().invoke(cli, ["backtest", data, *flag])
    assert result.exit_code == 2
    assert f"{flag[0]} goes with --config, not DATA" in result.output


def test_a_workload_whose_hpa_scales_on_gpu_utilization_is_compared_with_it(
    config: Path, tmp_path: Path
):
    document = yaml.safe_load(config.read_text())
    document["workloads"][0]["hpa_metric"] = "gpu-utilization"
    # and the config's tuning margin reaches the backtest that `train --tune` registers from
    document["evaluation"]["tuning_margin"] = 0.5
    config.write_text(yaml.safe_dump(document))
    outcome = backtest(config, tmp_path / "gpu.json")
    assert outcome.exit_code == 0, outcome.output
    deployed = json.loads((tmp_path / "gpu.json").read_text())["cpu"]["deployed"]
    assert {"reactive", "gpu-utilization", "hybrid"} <= set(deployed["policies"])
    assert deployed["tuning_margin"] == 0.5
    slo = load_config(config).policies["cpu"].spec.slo_unserved_fraction
    for row in deployed["policies"].values():
        assert row["tuning_unserved_fraction"] <= slo / 2
    # min_replicas 1: hybrid's sweep does not tune an activation probability, nor shows one
    assert "activation_probability" not in deployed["policies"]["hybrid"]["settings"]
    assert "vs_gpu_utilization" in deployed["savings"]
    assert "vs gpu-utilization" in outcome.output


def test_a_workload_recorded_from_later_on_walks_its_own_span(tmp_path: Path):
    # The fleet shares one grid: the late workload's cells before its first point are
    # missing; they failed its backtest with "'workload' has 0" rows, naming nothing.
    lines = (DATA / "google_cluster_cpu_5min.csv").read_text().splitlines(keepends=True)
    late, short = tmp_path / "late.csv", tmp_path / "short.csv"
    late.write_text(lines[0] + "".join(lines[-9 * 288 :]))
    short.write_text(lines[0] + "".join(lines[-288:]))
    capacity = {"capacity_per_replica": 0.03, "cold_start": "5m", "max_replicas": 40}
    document = {
        "source": {"type": "file", "lookback": "13d",
                   "files": {"early": str(DATA / "google_cluster_cpu_5min.csv"),
                             "late": str(late), "short": str(short)}},
        "workloads": [{"name": n, "capacity": capacity} for n in ("early", "late", "short")],
        "model": {"name": "ewma"},
        "evaluation": {"window": "1d", "train_window": "4d"},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    }  # fmt: skip
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(document))
    result = backtest(config, tmp_path / "late.json", "--workload", "late")
    assert result.exit_code == 0, result.output
    tuned = json.loads((tmp_path / "late.json").read_text())["late"]["deployed"]
    assert tuned["policies"]["hybrid"]["cost"] > 0
    refused = backtest(config, tmp_path / "short.json", "--workload", "short")
    assert refused.exit_code == 3, refused.output
    assert "workload 'short':" in refused.output and "'workload' has" not in refused.output
