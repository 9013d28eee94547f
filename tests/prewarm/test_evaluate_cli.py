from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from forecaster.scenarios import steady_diurnal
from prewarm import tables
from prewarm.cli import cli
from prewarm.evaluate import ModelNamed, table_spec

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "demand.csv"
    frame = steady_diurnal(days=6, step=300, seed=0)
    frame[["timestamp", "value"]].to_csv(path, index=False)
    return path


def test_evaluate_prints_a_table_and_writes_the_json(trace, tmp_path):
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            str(trace),
            "--horizon",
            "10m",
            "--eval-days",
            "1",
            "--refit-every",
            "12h",
            "--models",
            "last-value,lightgbm",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "lightgbm" in result.output and "last-value" in result.output
    report = json.loads(out.read_text())
    assert report["horizon_seconds"] == 600
    assert report["evaluation"]["origins"] == 288
    assert report["evaluation"]["start"] < report["evaluation"]["end"]
    assert set(report["models"]) == {"last-value", "lightgbm"}
    for scores in report["models"].values():
        assert set(scores["pinball"]) == {"0.5", "0.9"}
        assert set(scores["relative_pinball"]) == {"0.5", "0.9"}
        assert 0 <= scores["coverage"]["0.9"] <= 1
        assert scores["mae"] > 0 and scores["mase"] > 0 and scores["seconds"] >= 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--models", "prophet"], "unknown model 'prophet'", id="unknown-model"),
        pytest.param(["--horizon", "soon"], "duration such as 30s", id="bad-duration"),
        pytest.param(["--eval-days", "30"], "needs more history: the data spans 6d", id="too-long"),
        pytest.param(
            ["--eval-days", "30"],
            "(--eval-days 30) of forecasts 10m ahead (--horizon) needs more history",
            id="too-long-echoes-the-flags",
        ),
        pytest.param(["--eval-days", "30"], "lower --horizon or --eval-days", id="names-both"),
    ],
)
def test_bad_input_exits_non_zero_with_one_clear_line(trace, args, message):
    result = CliRunner().invoke(cli, ["evaluate", str(trace), *args])
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


def test_console_script_reports_a_missing_file(tmp_path):
    missing = tmp_path / "nope.csv"
    result = subprocess.run(
        [sys.executable, "-m", "prewarm", "evaluate", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 3  # a data error (prewarm.exit_codes)
    assert f"data file '{missing}' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def nyc_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``prewarm evaluate`` on 20 days of the NYC taxi trace (30-minute steps), piped and
    40 columns wide: the JSON and what it printed."""
    folder = tmp_path_factory.mktemp("nyc")
    path = folder / "nyc_20d.csv"
    with (DATA / "nyc_taxi_passengers_30min.csv").open() as lines:
        path.write_text("".join(line for _, line in zip(range(20 * 48 + 1), lines, strict=False)))
    out = folder / "report.json"
    result = CliRunner(env={"COLUMNS": "40"}).invoke(
        cli,
        [
            "evaluate",
            str(path),
            "--horizon",
            "1h",
            "--eval-days",
            "2",
            "--models",
            "last-value,ewma,seasonal-naive-daily,seasonal-naive-weekly",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return {"report": json.loads(out.read_text()), "output": result.output}


def _cell_texts(report: dict) -> list[str]:
    return [str(cell) for _, row in table_spec(report).rows for cell in row]


@pytest.mark.parametrize("width", [80, 60])
def test_the_table_fits_a_narrow_terminal_without_cutting_a_number(
    nyc_report: dict, width: int
) -> None:
    screen = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    tables.print_table(screen, table_spec(nyc_report["report"]))
    shown = screen.file.getvalue()
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= width
    tokens = set(shown.replace("│", " ").split())
    for name in nyc_report["report"]["models"]:
        assert name in tokens
    for text in _cell_texts(nyc_report["report"]):
        assert text in tokens, f"{text!r} is not shown whole"


def test_piped_output_is_markdown_with_every_value_whole(nyc_report: dict) -> None:
    output = nyc_report["output"]
    assert "| model | MAE | MASE | pinball q0.5 | pinball q0.9 |" in output
    assert "…" not in output
    cells = {cell.strip() for line in output.splitlines() for cell in line.split("|")}
    for text in _cell_texts(nyc_report["report"]):
        assert text in cells, f"{text!r} is not printed whole"
    # Every report states the scored span: 2 days of origins, ending at the last scoreable one.
    evaluation = nyc_report["report"]["evaluation"]
    assert evaluation["hours"] == pytest.approx(48.0)
    assert "2014-07-18 23:00 to 2014-07-20 23:00 UTC (2d)" in output


def test_llm_arrivals_at_10s_are_evaluated_with_mase_missing_and_why(tmp_path: Path) -> None:
    # 40 minutes of the Azure LLM conversation trace: one row per request, counted per 10 s.
    path = tmp_path / "llm.csv"
    with (DATA / "azure_llm_conv_arrivals.csv").open() as lines:
        path.write_text("".join(line for _, line in zip(range(13_001), lines, strict=False)))
    out = tmp_path / "report.json"
    models = "last-value,lightgbm,seasonal-naive-daily"
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            str(path),
            "--step",
            "10s",
            "--horizon",
            "1m",
            "--models",
            models,
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report["models"]) == {"last-value", "lightgbm"}
    for entry in report["models"].values():
        assert entry["mase"] is None
        assert "MASE needs more than `season`=8640 steps" in entry["missing"]["mase"]
        assert entry["mae"] > 0 and entry["pinball"]["0.9"] > 0
    assert "its season (1d) is longer than the history" in report["skipped"]["seasonal-naive-daily"]
    # No --eval-days on 40 minutes of data: the last 20% is scored, and the report says so.
    evaluation = report["evaluation"]
    assert evaluation["origins"] == round(0.2 * report["data"]["rows"])  # one row per 10 s
    assert evaluation["hours"] * 3600 == pytest.approx(evaluation["origins"] * 10)
    assert any("too short to score 7 days" in note for note in report["notes"])
    assert "| last-value | " in result.output and "—¹" in result.output
    assert "¹ MASE needs more than" in result.output
    assert "seasonal-naive-daily skipped: its season (1d)" in result.output


def test_evaluate_prints_per_horizon_and_window_coverage_side_by_side(trace, tmp_path):
    out = tmp_path / "report.json"
    args = ["evaluate", str(trace), "--horizon", "10m", "--hold", "15m", "--eval-days", "1"]
    models = "seasonal-naive-daily,lightgbm,lightgbm-window,lightgbm-window-shift"
    result = CliRunner().invoke(cli, [*args, "--models", models, "--json", str(out)])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "model" in line)
    assert "cov q0.9" in header and "window cov q0.9" in header
    report = json.loads(out.read_text())
    assert report["window_cells"] == [2, 5]  # 10 minutes ahead, then 15 more of 5-minute cells
    scores = report["models"]
    for entry in scores.values():
        assert 0 <= entry["window_coverage"]["0.9"] <= 1 and entry["window_pinball"]["0.9"] > 0
    # The window models share their (refitted) per-horizon forecasts; the window forecast is
    # each one's own, not the largest per-horizon quantile.
    windowed = scores["lightgbm-window"]
    assert windowed["coverage"] == scores["lightgbm-window-shift"]["coverage"]
    assert windowed["pinball"] == scores["lightgbm-window-shift"]["pinball"]
    assert windowed["window_coverage"] != scores["lightgbm"]["window_coverage"]
    assert windowed["window_pinball"] != scores["lightgbm-window-shift"]["window_pinball"]


def test_a_window_longer_than_the_scored_span_is_not_forecast(trace, tmp_path):
    # a 30-day hold on 6 days of data forecast 8,600 horizons (gigabytes) for no score
    out = tmp_path / "report.json"
    args = ["evaluate", str(trace), "--hold", "30d", "--eval-days", "1", "--models", "ewma"]
    result = CliRunner().invoke(cli, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["window_cells"] is None
    (entry,) = report["models"].values()
    assert entry["window_pinball"]["0.9"] is None and entry["pinball"]["0.9"] > 0
    assert "longer than the scored span" in entry["missing"]["window_pinball.0.9"]
    assert any("Window scores not computed" in note for note in report["notes"])


def test_a_scored_span_mostly_missing_says_on_how_few_points(tmp_path):
    frame = steady_diurnal(days=8, step=300, seed=0)[["timestamp", "value"]]
    # two days, then nothing for six days but the last two points
    gappy = frame.iloc[[*range(576), len(frame) - 2, len(frame) - 1]]
    path = tmp_path / "gappy.csv"
    gappy.to_csv(path, index=False)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli, ["evaluate", str(path), "--models", "ewma", "--eval-days", "5", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["evaluation"]["origins"] == 5 * 288
    assert report["evaluation"]["scored"] == 2  # the targets of the last two points alone
    assert "Only 2 of the 1440 forecasts had an observed demand" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "code", "named"),
    [
        ("--json", "{folder}", 2, "is a folder, not a file"),
        ("--json", "{file}/report.json", 2, "is a file"),
        ("--eval-days", "1e308", 3, "needs more history"),
    ],
)
def test_flags_no_run_can_satisfy_are_refused_before_it(trace, tmp_path, flag, value, code, named):
    (tmp_path / "file").write_text("")
    given = value.format(folder=tmp_path, file=tmp_path / "file")
    result = CliRunner().invoke(cli, ["evaluate", str(trace), "--models", "ewma", flag, given])
    assert result.exit_code == code, result.output
    assert named in result.output and "Traceback" not in result.output


def test_a_report_folder_no_run_could_write_is_refused_before_the_backtest(trace, tmp_path):
    """It ran the whole backtest, then failed on NotADirectoryError."""
    (tmp_path / "file").write_text("")
    report_dir = str(tmp_path / "file" / "r")
    result = CliRunner().invoke(
        cli, ["backtest", str(trace), "--cold-start", "5m", "--report-dir", report_dir]
    )
    assert result.exit_code == 2, result.output
    assert "--report-dir" in result.output and "is a file" in result.output
    assert "Traceback" not in result.output


def test_a_fit_s_warning_names_its_model_once_per_model(tmp_path: Path) -> None:
    # Three days of half-hour cells: too few origins to calibrate on, which each booster's
    # every fit warned about, in words no model's name was in.
    lines = (DATA / "nyc_taxi_passengers_30min.csv").read_text().splitlines()[:150]
    data = tmp_path / "short.csv"
    data.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        cli, ["evaluate", str(data), "--models", "lightgbm,lightgbm-window", "--refit-every", "6h"]
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    warned = [r["message"] for r in records if r["level"] == "warning"]
    assert len(warned) == 2, warned
    assert warned[0].startswith("lightgbm: calibration_window '3d' holds ")
    assert warned[1].startswith("lightgbm-window: calibration_window '3d' holds ")
    # the refits were there to say it again: the scored span has several blocks
    started = [r["message"] for r in records if r["logger"] == "prewarm.progress"]
    assert "evaluating lightgbm: 0/3" in started


def test_a_horizon_between_steps_is_rounded_up_and_said(trace, tmp_path):
    out = tmp_path / "report.json"
    args = ["evaluate", str(trace), "--horizon", "7m", "--models", "last-value"]
    result = CliRunner().invoke(cli, [*args, "--eval-days", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["horizon_cells"] == 2 and report["horizon_seconds"] == 600
    assert (
        "--horizon 7m is not a whole number of the data's 5m steps: forecasts are scored 10m "
        "ahead, the next whole step." in report["notes"]
    )


@pytest.mark.parametrize(("horizon", "code"), [("10m", 0), ("99d", 3)], ids=["run", "refused"])
def test_the_model_naming_filter_is_taken_off_after_the_run(trace, horizon, code):
    # Left on the forecaster's shared handlers, it prefixed what the process logged next with
    # the last model evaluated.
    result = CliRunner().invoke(
        cli, ["evaluate", str(trace), "--models", "last-value", "--horizon", horizon]
    )
    assert result.exit_code == code, result.output
    handlers = logging.getLogger("forecaster").handlers
    assert handlers, "evaluate configures the forecaster's handlers"
    assert not [f for h in handlers for f in h.filters if isinstance(f, ModelNamed)]
