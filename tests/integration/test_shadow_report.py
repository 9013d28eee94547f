"""``prewarm shadow-report`` against a real backfilled Prometheus and a real MLflow store.

A week of 1-minute demand for two workloads; for ``chat`` the "actual" replicas (and ready
replicas) are the project's own reactive HPA run on that demand through the simulator,
sampled every minute and backfilled as gauges, as kube-state-metrics would record them.
``code`` has no ``replicas`` query. The champion is trained on the five days before the two
days replayed, so the replay is out of sample.

The "with prewarm" numbers are checked against a hybrid fleet rebuilt here from the inputs:
the replicas as backfilled (not as the report read them), prewarm's asks checked origin by
origin against the champion's own serving plan on the history up to each origin, the HPA's
300 s scale-down window applied by a sliding window of its own, and the simulator. That is
exact (equal up to float rounding); ``prewarm backtest``'s hybrid would not be: it drives a
simulated HPA from the forecast, not the cluster's measured replicas.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from forecaster.backtest.metrics import compute_metrics
from forecaster.backtest.shadow import recorded_replicas
from forecaster.backtest.simulator import simulate
from forecaster.resampling import resample_demand
from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.train import EXIT_DATA
from tests.integration.prometheus import Gauge, free_port
from training.config import load_config, parse_config
from training.pipeline import run_training
from training.registry import load_champion

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

STEP, SIM = 60, 15
END = 1_767_225_600  # 2026-01-01T00:00:00Z
DAYS, SHADOW_DAYS = 7, 2
START = END - DAYS * 86400
CELLS = DAYS * 86400 // STEP
PERIOD = SHADOW_DAYS * 86400 // STEP  # cells replayed, the last ones of the week
CAPACITY = {"chat": 5.0, "code": 2.0}


def demand(seed: int, base: float) -> np.ndarray:
    values = gpu_inference_demand(days=DAYS, step=STEP, seed=seed, base_rate=base)["value"]
    return np.round(values.to_numpy(), 3)  # exactly what the gauge stores and returns


def config_document(tmp_path: Path, url: str) -> dict[str, Any]:
    capacity = {"cold_start": "5m", "max_replicas": 60, "slo_unserved_fraction": 0.01}
    return {
        "source": {"type": "prometheus", "url": url, "step": "1m", "retries": 0,
                   "lookback": f"{DAYS - SHADOW_DAYS}d", "end": "2025-12-30T00:00:00Z"},
        "workloads": [
            {"name": "chat", "demand": 'demand{workload="chat"}',
             "replicas": 'kube_deployment_status_replicas{deployment="chat"}',
             "ready_replicas": 'kube_deployment_status_replicas_available{deployment="chat"}',
             "capacity": {"capacity_per_replica": CAPACITY["chat"], **capacity}},
            {"name": "code", "demand": 'demand{workload="code"}',
             "capacity": {"capacity_per_replica": CAPACITY["code"], **capacity}},
        ],
        "model": {"params": {"n_estimators": 15, "learning_rate": 0.3},
                  "features": {"scale_window": "2h", "seasonal_lags": ["1d"]}},
        "evaluation": {"window": "12h", "train_window": "2d", "policies": ["predictive"]},
        "validation": {"min_history": "1d"},
        "gate": {"coverage_tolerance": 1.0},
        "mlflow": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                   "registered_model": "shadow"},
    }  # fmt: skip


class Cluster:
    """The backfilled server, the trained champion and the series behind them."""

    def __init__(self, root: Path, url: str, series: dict[str, np.ndarray]) -> None:
        self.root, self.url, self.series = root, url, series
        self.config = root / "prewarm.yaml"
        self.config.write_text(yaml.safe_dump(config_document(root, url)))
        self.uri = f"sqlite:///{root / 'mlflow.db'}"


def reactive_hpa(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Billed and ready replicas of the backtest's reactive HPA on ``values``, per minute."""
    policy = parse_config(config_document(Path("."), "http://unused")).policies["chat"]
    return recorded_replicas(values, STEP, policy)


def points(values: np.ndarray) -> list[tuple[float, float]]:
    return [(float(START + i * STEP), float(v)) for i, v in enumerate(values)]


@pytest.fixture(scope="module")
def cluster(prometheus_factory: Callable[..., Any], tmp_path_factory: Any) -> Cluster:
    chat, code = demand(5, 40.0), demand(6, 10.0)
    billed, ready = reactive_hpa(chat)
    chat_only = {"deployment": "chat"}
    server = prometheus_factory([
        Gauge("demand", [({"workload": "chat"}, points(chat)),
                         ({"workload": "code"}, points(code))]),
        Gauge("kube_deployment_status_replicas", [(chat_only, points(billed))]),
        Gauge("kube_deployment_status_replicas_available", [(chat_only, points(ready))]),
    ])  # fmt: skip
    root = tmp_path_factory.mktemp("shadow")
    made = Cluster(root, server.url, {"chat": chat, "code": code, "billed": billed})
    result = run_training(load_config(made.config), tracking_uri=made.uri)
    assert result.version == "1", result.message
    return made


def shadow(cluster: Cluster, config: Path, out: Path) -> Any:
    return CliRunner().invoke(
        cli,
        ["shadow-report", "--config", str(config), "--since", f"{SHADOW_DAYS}d",
         "--until", "2026-01-01T00:00:00Z", "--out", str(out), "--tracking-uri", cluster.uri],
    )  # fmt: skip


@pytest.fixture(scope="module")
def report(cluster: Cluster) -> tuple[dict[str, Any], Path]:
    out = cluster.root / "report"
    outcome = shadow(cluster, cluster.config, out)
    assert outcome.exit_code == 0, outcome.output
    return json.loads((out / "shadow.json").read_text()), out


def test_actual_replica_hours_are_the_backfilled_series_integral(
    report: tuple[dict[str, Any], Path], cluster: Cluster
) -> None:
    document, _ = report
    assert document["period"] == {
        "start": "2025-12-30T00:00:00+00:00", "end": "2026-01-01T00:00:00+00:00",
        "hours": 48.0, "step_seconds": STEP,
    }  # fmt: skip
    integral = cluster.series["billed"][-PERIOD:].sum() * STEP / 3600.0
    actual = document["workloads"]["chat"]["actual"]
    assert actual["source"] == "measured"
    assert actual["replica_hours"] == pytest.approx(integral, rel=0.01)
    assert integral > 100  # a real fleet, not a degenerate one


def test_prewarm_numbers_are_the_hybrid_fleet_rebuilt_from_the_inputs(
    report: tuple[dict[str, Any], Path], cluster: Cluster
) -> None:
    document, out = report
    series = pd.read_csv(out / "series" / "chat.csv")
    asks = series["prewarm_asks"].to_numpy()
    per_cell = STEP // SIM
    # Each ask is the champion's serving plan on the history up to the cell before it.
    loaded = load_champion("shadow", cluster.uri)
    context = loaded.history_cells_needed + 1
    for cell in (0, 7, PERIOD // 2, PERIOD - 1):
        origin = CELLS - PERIOD + cell - 1
        history = pd.concat(
            pd.DataFrame({
                "series": name,
                "timestamp": pd.to_datetime(
                    START + STEP * np.arange(origin - context + 1, origin + 1), unit="s", utc=True
                ),
                "value": cluster.series[name][origin - context + 1 : origin + 1],
            })
            for name in ("chat", "code")
        )  # fmt: skip
        plan = loaded.plan(history).set_index("series")
        assert set(asks[cell * per_cell : (cell + 1) * per_cell]) == {
            plan.loc["chat", "desired_replicas"]
        }, cell
    policy = loaded.model.policies["chat"]
    billed = np.repeat(cluster.series["billed"][-PERIOD:], per_cell)
    window = 300 // SIM + 1  # Kubernetes' scale-down stabilization: the last 300 s
    padded = np.concatenate([np.full(window - 1, asks[0]), asks])
    kept = np.lib.stride_tricks.sliding_window_view(padded, window).max(axis=1)
    rate = resample_demand(cluster.series["chat"][-PERIOD:], STEP, SIM)
    hybrid = simulate(rate, np.maximum(kept, billed), policy.spec, step_seconds=SIM, seed=0)
    expected = compute_metrics(hybrid, policy.spec)
    prewarm = document["workloads"]["chat"]["prewarm"]
    assert prewarm["replica_hours"] == pytest.approx(expected.replica_hours, rel=1e-9)
    assert prewarm["cost"] == pytest.approx(expected.cost, rel=1e-9)
    assert prewarm["unserved_fraction"] == pytest.approx(expected.unserved_fraction, abs=1e-12)
    entry = document["workloads"]["chat"]
    assert entry["saved_replica_hours"] == pytest.approx(
        entry["actual"]["replica_hours"] - expected.replica_hours
    )
    assert entry["unserved_fraction"]["prewarm"] == prewarm["unserved_fraction"]
    assert 0 <= entry["coverage"] <= 1 and entry["pinball"] > 0
    total = document["total"]
    assert total["prewarm"]["replica_hours"] == pytest.approx(
        sum(w["prewarm"]["replica_hours"] for w in document["workloads"].values())
    )


def test_a_workload_without_replicas_is_compared_with_the_simulated_reactive_hpa(
    report: tuple[dict[str, Any], Path],
) -> None:
    document, out = report
    code = document["workloads"]["code"]
    assert code["actual"]["source"] == "simulated reactive HPA"
    assert any("no `replicas` query" in note for note in code["notes"])
    assert "code: no `replicas` query" in (out / "shadow.md").read_text()
    assert (out / "code.png").stat().st_size > 0


def test_a_prometheus_that_is_down_exits_with_the_data_source_code(
    cluster: Cluster, tmp_path: Path
) -> None:
    document = config_document(cluster.root, f"http://127.0.0.1:{free_port()}")
    config = tmp_path / "down.yaml"
    config.write_text(yaml.safe_dump(document))
    outcome = shadow(cluster, config, tmp_path / "report")
    assert outcome.exit_code == EXIT_DATA, outcome.output
    assert "data-source failure" in outcome.output
    assert "'chat'" in outcome.output and 'demand{workload="chat"}' in outcome.output
    assert "Traceback" not in outcome.output
    assert not (tmp_path / "report").exists()
