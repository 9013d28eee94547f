"""``prewarm shadow-report`` against a real backfilled Prometheus and a real MLflow store.

A week of 1-minute demand for two workloads; for ``chat`` the "actual" replicas (and ready
replicas) are the project's own reactive HPA run on that demand through the simulator,
recorded every 15 s and backfilled as gauges, as kube-state-metrics scraped at that interval
would record them. ``code`` has no ``replicas`` query. The champion is trained on the five
days before the two days replayed, so the replay is out of sample.

With the asks replayed, the "with prewarm" numbers are checked against ``prewarm
backtest``'s hybrid at the registered setting on the same period, demand and forecasts: the
champion's, with no refit (``prewarm backtest --config`` refits walk-forward, so it is run
here on the observation the replay read, whose demand and asks are checked against the
backfilled series and the champion's own serving plan). For ``chat`` Prometheus also holds
the asks ``serve --shadow`` would have recorded, a constant that differs from the replay:
the default report uses them, and its numbers are the hybrid fleet rebuilt from that
constant; ``code`` has none and is replayed. Each report says which asks it used.
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

from forecaster.backtest.frontier import run_policy
from forecaster.backtest.metrics import compute_metrics
from forecaster.backtest.shadow import recorded_replicas
from forecaster.backtest.simulator import simulate
from forecaster.capacity import desired_replicas
from forecaster.resampling import resample_demand
from forecaster.scenarios import gpu_inference_demand
from prewarm.cli import cli
from prewarm.shadow import WorkloadShadow, period_of, replay_workloads
from prewarm.train import EXIT_DATA
from tests.integration.prometheus import Gauge, free_port
from training.config import load_config, parse_config
from training.pipeline import run_training
from training.registry import load_champion
from training.sources import make_source
from training.sources.base import wall_clock

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

STEP, SIM = 60, 15
PER_CELL = STEP // SIM
END = 1_767_225_600  # 2026-01-01T00:00:00Z
UNTIL = "2026-01-01T00:00:00Z"
DAYS, SHADOW_DAYS = 7, 2
START = END - DAYS * 86400
CELLS = DAYS * 86400 // STEP
PERIOD = SHADOW_DAYS * 86400 // STEP  # cells replayed, the last ones of the week
STEPS = PERIOD * PER_CELL  # simulation steps replayed
CAPACITY = {"chat": 5.0, "code": 2.0}
# The forecast demand serve --shadow "recorded" for chat: well above the replayed one.
RECORDED_DEMAND = 100.0
# The bound: the shadow's hybrid fleet against the backtest's on the same inputs.
BACKTEST_TOLERANCE = 0.02


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
    """Billed and ready replicas of the backtest's reactive HPA on ``values``, per 15 s."""
    policy = parse_config(config_document(Path("."), "http://unused")).policies["chat"]
    return recorded_replicas(values, STEP, policy)


def points(values: np.ndarray, step: int = STEP, start: int = START) -> list[tuple[float, float]]:
    return [(float(start + i * step), float(v)) for i, v in enumerate(values)]


@pytest.fixture(scope="module")
def cluster(prometheus_factory: Callable[..., Any], tmp_path_factory: Any) -> Cluster:
    chat, code = demand(5, 40.0), demand(6, 10.0)
    billed, ready = reactive_hpa(chat)
    chat_only = {"deployment": "chat"}
    asked = np.full(STEPS, RECORDED_DEMAND)
    server = prometheus_factory([
        Gauge("demand", [({"workload": "chat"}, points(chat)),
                         ({"workload": "code"}, points(code))]),
        Gauge("kube_deployment_status_replicas", [(chat_only, points(billed, SIM))]),
        Gauge("kube_deployment_status_replicas_available", [(chat_only, points(ready, SIM))]),
        Gauge("prewarm_forecast_demand",
              [({"workload": "chat"}, points(asked, SIM, END - STEPS * SIM))]),
    ])  # fmt: skip
    root = tmp_path_factory.mktemp("shadow")
    made = Cluster(root, server.url, {"chat": chat, "code": code, "billed": billed})
    result = run_training(load_config(made.config), tracking_uri=made.uri)
    assert result.version == "1", result.message
    return made


def shadow(cluster: Cluster, config: Path, out: Path, *options: str) -> Any:
    return CliRunner().invoke(
        cli,
        ["shadow-report", "--config", str(config), "--since", f"{SHADOW_DAYS}d",
         "--until", UNTIL, "--out", str(out), "--tracking-uri", cluster.uri, *options],
    )  # fmt: skip


def run_report(cluster: Cluster, name: str, *options: str) -> tuple[dict[str, Any], Path]:
    out = cluster.root / name
    outcome = shadow(cluster, cluster.config, out, *options)
    assert outcome.exit_code == 0, outcome.output
    return json.loads((out / "shadow.json").read_text()), out


@pytest.fixture(scope="module")
def report(cluster: Cluster) -> tuple[dict[str, Any], Path]:
    """The default report: chat's recorded asks are used, code's are replayed."""
    return run_report(cluster, "report")


@pytest.fixture(scope="module")
def replayed(cluster: Cluster) -> tuple[dict[str, Any], Path]:
    """The report with every ask replayed from the champion (``--asks-query ''``)."""
    return run_report(cluster, "replayed", "--asks-query", "")


@pytest.fixture(scope="module")
def shadows(cluster: Cluster) -> dict[str, WorkloadShadow]:
    """The replay behind the replayed report, read from the same Prometheus."""
    config = load_config(cluster.config)
    loaded = load_champion("shadow", cluster.uri)
    period = period_of(SHADOW_DAYS * 86400, pd.Timestamp(UNTIL), loaded.step, wall_clock)
    source = make_source(config.source.type, config.source)
    try:
        return replay_workloads(config, loaded, source, period, asks_query="")
    finally:
        source.close()


def test_actual_replica_hours_are_the_backfilled_series_integral(
    report: tuple[dict[str, Any], Path], cluster: Cluster
) -> None:
    document, _ = report
    assert document["period"] == {
        "start": "2025-12-30T00:00:00+00:00", "end": "2026-01-01T00:00:00+00:00",
        "hours": 48.0, "step_seconds": STEP,
    }  # fmt: skip
    integral = cluster.series["billed"][-STEPS:].sum() * SIM / 3600.0
    actual = document["workloads"]["chat"]["actual"]
    assert actual["source"] == "measured"
    assert actual["replica_hours"] == pytest.approx(integral, rel=0.01)
    assert integral > 100  # a real fleet, not a degenerate one


def test_replayed_asks_are_the_champion_serving_plan_without_refit(
    replayed: tuple[dict[str, Any], Path], cluster: Cluster
) -> None:
    _, out = replayed
    asks = pd.read_csv(out / "series" / "chat.csv")["prewarm_asks"].to_numpy()
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
        assert set(asks[cell * PER_CELL : (cell + 1) * PER_CELL]) == {
            plan.loc["chat", "desired_replicas"]
        }, cell


@pytest.mark.parametrize("name", ["chat", "code"])
def test_with_prewarm_is_the_backtest_hybrid_on_the_champion_forecasts(
    replayed: tuple[dict[str, Any], Path],
    shadows: dict[str, WorkloadShadow],
    cluster: Cluster,
    name: str,
) -> None:
    document, out = replayed
    entry = document["workloads"][name]
    assert entry["asks_source"] == "replayed"
    replay = shadows[name].result
    obs = replay.observation
    # the backtest's input is this period's demand as backfilled, with the forecasts whose
    # asks the serving-plan test checks against the champion
    assert np.array_equal(obs.demand[obs.start :], cluster.series[name][-PERIOD:])
    assert obs.forecast is not None
    series = pd.read_csv(out / "series" / f"{name}.csv")
    assert np.array_equal(series["prewarm_asks"].to_numpy(), replay.asks)
    policy = load_champion("shadow", cluster.uri).model.policies[name]
    _, backtest = run_policy(obs, "hybrid", policy.settings(), seed=0)
    prewarm = entry["prewarm"]
    assert prewarm["replica_hours"] == pytest.approx(backtest.replica_hours, rel=BACKTEST_TOLERANCE)
    assert prewarm["unserved_fraction"] == pytest.approx(
        backtest.unserved_fraction, rel=BACKTEST_TOLERANCE
    )
    assert backtest.unserved_fraction > 0  # a relative bound on a fleet that drops work
    # the hybrid fleet is not the actual one: the comparison has something to compare
    assert prewarm["replica_hours"] > 1.1 * entry["actual"]["replica_hours"]


def test_recorded_asks_are_used_and_the_numbers_follow_them(
    report: tuple[dict[str, Any], Path],
    replayed: tuple[dict[str, Any], Path],
    cluster: Cluster,
) -> None:
    document, out = report
    chat = document["workloads"]["chat"]
    assert chat["asks_source"] == "recorded"
    assert chat["asks_coverage"] == 1.0
    series = pd.read_csv(out / "series" / "chat.csv")
    policy = load_champion("shadow", cluster.uri).model.policies["chat"]
    spec = policy.spec
    # The asks are the desired replicas of the recorded forecast demand...
    (asked,) = desired_replicas(
        np.array([RECORDED_DEMAND]),
        capacity_per_replica=spec.capacity_per_replica,
        target_utilization=policy.forecast_u,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
    )
    assert asked >= 20
    assert set(series["prewarm_asks"]) == {asked}
    # ...and an HPA reading a constant forecast demand holds them, so the hybrid fleet is
    # max(that count, the replicas the cluster ran).
    billed = cluster.series["billed"][-STEPS:]
    rate = resample_demand(cluster.series["chat"][-PERIOD:], STEP, SIM)
    fleet = simulate(rate, np.maximum(asked, billed), spec, step_seconds=SIM)
    expected = compute_metrics(fleet, policy.spec)
    prewarm = chat["prewarm"]
    assert prewarm["replica_hours"] == pytest.approx(expected.replica_hours, rel=1e-9)
    assert prewarm["cost"] == pytest.approx(expected.cost, rel=1e-9)
    assert prewarm["unserved_fraction"] == pytest.approx(expected.unserved_fraction, abs=1e-12)
    other = replayed[0]["workloads"]["chat"]
    assert other["actual"] == chat["actual"]  # only the asks changed
    assert prewarm["replica_hours"] > other["prewarm"]["replica_hours"] + 100
    assert any("asks: recorded by serve --shadow" in note for note in chat["notes"])
    markdown = (out / "shadow.md").read_text()
    assert "| chat | recorded |" in markdown
    total = document["total"]
    assert total["prewarm"]["replica_hours"] == pytest.approx(
        sum(w["prewarm"]["replica_hours"] for w in document["workloads"].values())
    )


def test_without_recorded_asks_the_report_replays_and_says_so(
    report: tuple[dict[str, Any], Path],
) -> None:
    document, out = report
    code = document["workloads"]["code"]
    assert code["asks_source"] == "replayed"
    assert code["asks_coverage"] == 0.0
    query = """'prewarm_forecast_demand{workload="code"}'"""
    note = f"code: asks: replayed from the champion, none recorded ({query})"
    markdown = (out / "shadow.md").read_text()
    assert note in markdown
    assert "| code | replayed |" in markdown


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
