"""``prewarm backtest`` end to end on small files, its scored span, and its one-line errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from rich.console import Console

from forecaster.backtest.tuning import TUNING_MARGIN
from forecaster.models import DEFAULT_MODEL
from prewarm import backtest_report, payoff, tables
from prewarm.cli import cli

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    n = 9 * 288
    t = np.arange(n)
    values = 100 + 60 * np.sin(2 * np.pi * t / 288) + rng.gamma(2.0, 5.0, n)
    path = tmp_path_factory.mktemp("data") / "demand.csv"
    times = pd.date_range("2026-01-05", periods=n, freq="5min")
    pd.DataFrame({"timestamp": times, "value": values}).to_csv(path, index=False)
    return path


ARGS = ["--model", "ewma", "--train-window", "8d", "--retrain-every", "12h", "--min-eval", "1d"]


def test_backtest_writes_json_and_report(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    report = tmp_path / "report"
    result = CliRunner().invoke(
        cli,
        ["backtest", str(data_file), *ARGS, "--json", str(out), "--report-dir", str(report)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert set(document) >= {
        "data",
        "evaluation",
        "settings",
        "policies",
        "frontier",
        "cost_at_slo",
        "savings_at_slo",
        "forecast",
    }
    assert document["data"]["rows"] == 9 * 288
    assert document["data"]["step_seconds"] == 300
    assert document["evaluation"]["hours"] == pytest.approx(24.0)
    # --peak-replicas 20: the 99th percentile needs 20 replicas
    p99 = np.quantile(pd.read_csv(data_file)["value"], 0.99)
    assert document["settings"]["capacity_per_replica"] == pytest.approx(p99 / 20)
    assert list(document["policies"]) == [
        "static",
        "reactive",
        "seasonal-naive",
        "predictive",
        "buffered",
        "hybrid",
        "oracle",
    ]
    for row in document["policies"].values():
        assert {"knob", "replica_hours", "cost", "unserved_fraction", "meets_slo"} <= set(row)
    assert document["policies"]["oracle"]["unserved_fraction"] == 0.0
    oracle_cost = document["policies"]["oracle"]["cost"]
    assert all(
        p["cost"] >= oracle_cost
        for name, p in document["policies"].items()
        if p["unserved_fraction"] == 0.0
    )
    assert set(document["savings_at_slo"]) == {
        "vs_reactive",
        "vs_static",
        "vs_seasonal_naive",
        "oracle_gap",
    }
    assert document["forecast"]["ewma"]["horizon_seconds"] == 600
    assert json.loads((report / "backtest.json").read_text()) == document
    assert (report / "capacity.png").stat().st_size > 0
    assert (report / "frontier.png").stat().st_size > 0
    assert "![frontier](frontier.png)" in (report / "backtest.md").read_text()


def test_a_saving_hybrid_has_none_of_names_hybrid_when_it_did_not_run(fortnight: dict) -> None:
    document = json.loads(json.dumps(fortnight["document"]))
    del document["deployed"]["policies"]["hybrid"]
    document["deployed"]["savings"] = dict.fromkeys(document["deployed"]["savings"])
    line = backtest_report.savings_line(document)
    # it said "reactive did not run" while the reactive HPA had run
    assert "none vs reactive (hybrid did not run)" in line
    assert "reactive did not run" not in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policies", "static,magic"], "unknown policy 'magic'"),
        (
            ["--min-eval", "9d"],
            "too short to train on anything before scoring 9d; lower --min-eval",
        ),
        (["--cold-start", "5x"], "--cold-start"),
        (["--tuning-margin", "0"], "--tuning-margin"),
        (["--tuning-margin", "1.5"], "--tuning-margin"),
        (["--cold-start-sweep", "30s,soon"], "--cold-start-sweep"),
        (["--cold-start-sweep", "5m", "--report-dir", "r"], "writes --json only"),
        # both said "no finite (actual, predicted) pair" or "windows must be whole data steps"
        (["--cold-start", "100d"], "lower `cold_start` or give more data"),
        (["--train-window", "30s"], "`train_window` must be a whole number of the data's"),
        (["--retrain-every", "30s"], "`retrain_every` must be a whole number of the data's"),
    ],
    ids=[
        "unknown-policy",
        "short-history",
        "bad-duration",
        "zero-margin",
        "margin-over-1",
        "bad-sweep",
        "sweep-report-dir",
        "lead-past-the-data",
        "train-window-off-grid",
        "retrain-off-grid",
    ],
)
def test_bad_input_exits_with_one_line(data_file: Path, extra: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["backtest", str(data_file), "--model", "ewma", *extra])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreadable_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["backtest", str(tmp_path / "missing.csv")])
    assert result.exit_code != 0
    assert "does not exist" in result.output


def _head(source: str, rows: int, path: Path) -> Path:
    """The first ``rows`` records of a shipped trace, as a file of its own."""
    with (DATA / source).open() as lines, path.open("w") as out:
        out.writelines(line for _, line in zip(range(rows + 1), lines, strict=False))
    return path


@pytest.fixture(scope="module")
def fortnight(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The backtest JSON of the first 14 days of the Google cluster trace (5-minute steps)
    under the default 14-day training window, and what the command printed."""
    folder = tmp_path_factory.mktemp("fortnight")
    path = _head("google_cluster_cpu_5min.csv", 14 * 288, folder / "google_14d.csv")
    out = folder / "result.json"
    policies = "static,reactive,seasonal-naive,hybrid"
    # Piped (CliRunner is no terminal) and 40 columns wide: the tables must come out whole.
    result = CliRunner(env={"COLUMNS": "40"}).invoke(
        cli, ["backtest", str(path), "--model", "ewma", "--policies", policies, "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    return {"document": json.loads(out.read_text()), "output": result.output}


def test_a_14_day_trace_is_scored_over_3_days_with_a_shortened_window(fortnight: dict) -> None:
    document = fortnight["document"]
    assert document["evaluation"]["hours"] == pytest.approx(72.0)
    assert document["settings"]["train_window_seconds"] == 11 * 86400
    note = "Training window shortened from 14d to 11d so that at least 3d is scored"
    assert any(line.startswith(note) for line in document["notes"])
    assert note in fortnight["output"]
    assert "scored 2019-05-12 00:00 to 2019-05-15 00:00 UTC (3d)" in fortnight["output"]
    # 11 days before the evaluation hold seasonal-naive's week: every policy ran.
    assert list(document["policies"]) == ["static", "reactive", "seasonal-naive", "hybrid"]
    assert document["skipped"] == {}


def _cell_texts(document: dict) -> list[str]:
    """Every value of the policy table, a multi-line cell (the knob) line by line."""
    spec = backtest_report.policy_table(document)
    return [line for _, row in spec.rows for cell in row for line in str(cell).splitlines()]


@pytest.mark.parametrize("width", [80, 60])
def test_the_table_fits_a_narrow_terminal_without_cutting_a_value(
    fortnight: dict, width: int
) -> None:
    screen = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    tables.print_table(screen, backtest_report.policy_table(fortnight["document"]))
    shown = screen.file.getvalue()
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= width
    tokens = set(shown.replace("│", " ").split())
    for text in _cell_texts(fortnight["document"]):
        assert text in tokens, f"{text!r} is not shown whole"


def test_piped_output_is_markdown_with_every_value_whole(fortnight: dict) -> None:
    output = fortnight["output"]
    assert "| policy | knob | cost | replica hours |" in output
    assert "…" not in output
    cells = {cell.strip() for line in output.splitlines() for cell in line.split("|")}
    cells |= {part for cell in cells for part in cell.split(", ")}  # the knob's settings
    for text in _cell_texts(fortnight["document"]):
        assert text in cells, f"{text!r} is not printed whole"


def test_each_table_says_what_its_cost_and_unserved_count(fortnight: dict) -> None:
    # A cost of "4,032.0" read as dollars, hours or replicas alike.
    note = (
        "cost: replica-hours x 4 per replica-hour (--replica-hour-cost, "
        "capacity.replica_hour_cost); unserved: the fraction of the work not served within 30s"
    )
    assert fortnight["output"].count(note) == 2, fortnight["output"]
    for row in fortnight["document"]["policies"].values():
        assert row["cost"] == pytest.approx(4 * row["replica_hours"])


@pytest.mark.parametrize(
    ("rung", "path"),
    [
        ({"target_utilization": 0.15}, "reactive path"),
        ({"forecast_utilization": 0.25}, "forecast path"),
    ],
)
def test_a_tuned_rung_of_reach_is_called_headroom_not_forecast(
    fortnight: dict, rung: dict, path: str
) -> None:
    document = fortnight["document"]
    # On two weeks of the smooth Google trace no tuned setting is a rung, and nothing says so.
    assert backtest_report.headroom_line(document) is None
    assert "rung of reach" not in fortnight["output"]
    assert "rung of reach" not in backtest_report.markdown(document)
    hybrid = document["deployed"]["policies"]["hybrid"]
    at_rung = json.loads(json.dumps(document))
    at_rung["deployed"]["policies"]["hybrid"]["settings"] = hybrid["settings"] | rung
    line = backtest_report.headroom_line(at_rung)
    assert line is not None
    u = next(iter(rung.values()))
    assert f"its {path} at utilization {u:g} keeps {1 / u:.3g}x" in line
    assert line in backtest_report.markdown(at_rung)


def test_a_deployed_setting_at_the_slos_edge_is_said(fortnight: dict) -> None:
    document = fortnight["document"]
    slo = document["settings"]["slo_unserved_fraction"]
    policies = document["deployed"]["policies"]
    # On two weeks of the smooth Google trace every deployed setting has room to spare.
    assert all(row["unserved_fraction"] <= 0.9 * slo for row in policies.values())
    assert backtest_report.edge_line(document) is None
    assert "SLO's edge" not in fortnight["output"]
    at_edge = json.loads(json.dumps(document))
    at_edge["deployed"]["policies"]["reactive"] |= {"unserved_fraction": 0.95 * slo}
    line = backtest_report.edge_line(at_edge)
    assert line is not None and f"reactive {0.95 * slo:.3%} (SLO {slo:.3%})" in line
    assert line in backtest_report.markdown(at_edge)


def test_llm_arrivals_at_10s_backtest_without_mase_or_a_week_of_history(tmp_path: Path) -> None:
    # 40 minutes of the Azure LLM conversation trace: one row per request.
    path = _head("azure_llm_conv_arrivals.csv", 13_000, tmp_path / "llm.csv")
    out = tmp_path / "result.json"
    result = CliRunner().invoke(cli, ["backtest", str(path), "--step", "10s", "--json", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    # The command's default model and tuning margin are the package's (the CLI names them
    # without importing it).
    assert list(document["forecast"]) == [DEFAULT_MODEL]
    assert document["deployed"]["tuning_margin"] == TUNING_MARGIN
    forecast = document["forecast"][DEFAULT_MODEL]
    assert forecast["mase"] is None
    assert "MASE needs more than `season`=8640 steps" in forecast["missing"]["mase"]
    assert forecast["pinball"] and all(v >= 0 for v in forecast["pinball"].values())
    assert "seasonal-naive" not in document["policies"]
    assert "needs 60839 data steps of history" in document["skipped"]["seasonal-naive"]
    assert "seasonal-naive skipped: seasonal-naive needs" in result.output
    # auto --min-eval on 40 minutes: the last 20% is scored, 80% trains.
    span = document["data"]["rows"] * 10
    scored = document["evaluation"]["hours"] * 3600
    assert scored >= 0.2 * span and scored < 0.2 * span + 10
    assert document["settings"]["train_window_seconds"] + scored == pytest.approx(span)


def test_a_gpu_utilization_hpa_is_backtested_and_compared(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    policies = ["--policies", "reactive,hybrid,oracle", "--hpa-metric", "gpu-utilization"]
    result = CliRunner().invoke(
        cli, ["backtest", str(data_file), *ARGS, *policies, "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert list(document["policies"]) == ["reactive", "hybrid", "oracle", "gpu-utilization"]
    deployed = document["deployed"]
    gpu = deployed["policies"]["gpu-utilization"]
    assert gpu["settings"]["target_utilization"] > 0
    # The same sweep budget as the HPA on the demand.
    assert gpu["settings_tried"] == deployed["policies"]["reactive"]["settings_tried"]
    assert set(document["savings_at_slo"]) >= {"vs_reactive", "vs_gpu_utilization"}
    saving = deployed["savings"]["vs_gpu_utilization"]
    if saving is None:
        assert "vs gpu-utilization (" in result.output
    else:
        hybrid = deployed["policies"]["hybrid"]["cost"]
        assert saving == pytest.approx(1 - hybrid / gpu["cost"])
        assert f"{saving:+.1%} vs gpu-utilization" in result.output


def test_a_tuning_margin_holds_every_tuned_setting_to_its_share_of_the_slo(
    data_file: Path, tmp_path: Path
) -> None:
    documents = {}
    for margin in ("1", "0.25"):
        out = tmp_path / f"margin-{margin}.json"
        result = CliRunner().invoke(
            cli,
            ["backtest", str(data_file), *ARGS, "--tuning-margin", margin, "--json", str(out)],
        )
        assert result.exit_code == 0, result.output
        documents[margin] = json.loads(out.read_text())
    slo = documents["1"]["settings"]["slo_unserved_fraction"]
    strict = documents["0.25"]["deployed"]
    assert strict["tuning_margin"] == 0.25
    assert documents["1"]["deployed"]["tuning_margin"] == 1.0
    frontier = documents["1"]["frontier"]  # the same settings simulated in both runs
    assert frontier == documents["0.25"]["frontier"]
    moved = []
    for name, row in strict["policies"].items():
        plain = documents["1"]["deployed"]["policies"][name]
        # every policy has a setting within a quarter of the SLO on this trace
        assert row["tuning_unserved_fraction"] <= slo / 4
        assert row["tuning_cost"] >= plain["tuning_cost"]
        if plain["tuning_unserved_fraction"] <= slo / 4:
            assert row["settings"] == plain["settings"]  # the plain choice already qualified
        else:
            moved.append(name)
    # the reactive HPA's plain choice left 0.09% unserved on tuning, against a 0.1% SLO
    assert "reactive" in moved and "hybrid" in moved
    report = backtest_report.deployed_table(documents["0.25"])
    assert "setting that leaves at most 0.25 of the SLO's unserved work on" in report.title
    plain = backtest_report.deployed_table(documents["1"]).title
    assert "setting that meets the SLO on" in plain and "of the SLO" not in plain


def test_the_seed_reaches_the_models_draws(data_file: Path, tmp_path: Path) -> None:
    pinball = []
    for seed in ("0", "1", "0"):
        out = tmp_path / f"seed-{seed}.json"
        args = ["--model", "lightgbm", *ARGS[2:], "--policies", "predictive", "--seed", seed]
        result = CliRunner().invoke(cli, ["backtest", str(data_file), *args, "--json", str(out)])
        assert result.exit_code == 0, result.output
        pinball.append(json.loads(out.read_text())["forecast"]["lightgbm"]["pinball"])
    assert pinball[0] != pinball[1]  # another draw of rows and features, another forecast
    assert pinball[0] == pinball[2]  # and the same seed, the same one


def test_n_seeds_averages_boosters_in_the_backtested_model(data_file: Path, tmp_path: Path) -> None:
    pinball = {}
    for n_seeds in ("1", "2"):
        out = tmp_path / f"n-{n_seeds}.json"
        args = ["--model", "lightgbm", *ARGS[2:], "--policies", "predictive"]
        args = [*args, "--n-seeds", n_seeds, "--json", str(out)]
        result = CliRunner().invoke(cli, ["backtest", str(data_file), *args])
        assert result.exit_code == 0, result.output
        pinball[n_seeds] = json.loads(out.read_text())["forecast"]["lightgbm"]["pinball"]
    assert pinball["1"] != pinball["2"]  # the second booster reaches the forecast


def test_n_seeds_for_a_model_without_boosters_is_a_usage_error(
    data_file: Path, tmp_path: Path
) -> None:
    args = ["backtest", str(data_file), "--model", "ewma", "--n-seeds", "3"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "--n-seeds 3: model 'ewma' averages no boosters; these do: hist-gbm, lightgbm" in (
        result.output
    )
    config = tmp_path / "train.yaml"
    config.write_text("{}")
    result = CliRunner().invoke(cli, ["backtest", "--config", str(config), "--n-seeds", "2"])
    assert result.exit_code == 2
    assert "with --config the config sets it (model.params.n_seeds)" in result.output


def test_a_cold_start_sweep_says_where_prediction_stops_paying(
    data_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sweep.json"
    policies = ["--policies", "static,reactive,predictive,hybrid,oracle"]
    args = ["backtest", str(data_file), *ARGS, *policies, "--json", str(out)]
    result = CliRunner().invoke(cli, [*args, "--cold-start-sweep", "10m,30s"])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert list(document["cold_starts"]) == ["30", "600"]  # shortest first
    # each cold start is exactly the plain backtest at that cold start
    single = tmp_path / "single.json"
    alone = CliRunner().invoke(cli, [*args[:-1], str(single), "--cold-start", "10m"])
    assert alone.exit_code == 0, alone.output
    deployed = json.loads(single.read_text())["deployed"]["policies"]
    swept = document["cold_starts"]["600"]["deployed"]
    assert set(swept) == set(deployed)
    for policy, row in swept.items():
        assert row == {key: deployed[policy][key] for key in row}, policy
    verdicts = {int(c): row["verdict"] for c, row in document["cold_starts"].items()}
    assert document["where_it_stops"] == payoff.where_it_stops(verdicts)
    # the table names each cold start and the crossover sentence
    assert "| 30s |" in result.output and "| 10m |" in result.output
    assert f"Prediction {document['where_it_stops']}." in result.output
