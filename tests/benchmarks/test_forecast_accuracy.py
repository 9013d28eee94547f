"""The forecast accuracy benchmark: its verdict logic and a quick end-to-end run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from benchmarks.forecast_accuracy import (
    AUTO_HOURLY,
    BASELINE_RIVALS,
    COMBINATION_SHORT_WINDOWS,
    HINDSIGHT,
    HOURLY_MODEL,
    SHORT,
    SHORT_WINDOW_FEATURES,
    SHORT_WINDOWS,
    TRACES,
    auto_hourly,
    averaged,
    block_losses,
    check_lead,
    check_target,
    combined_rows,
    figure,
    lead_interval,
    lead_markdown,
    main,
    results_stem,
    short_windows,
    table_rows,
)
from benchmarks.peers import PEERS
from forecaster.duration import parse_duration
from forecaster.features import FeatureConfig
from forecaster.models import DEFAULT_MODEL, MODELS, make_model
from forecaster.models.combination import SELECT_CANDIDATES

DATA = Path(__file__).resolve().parents[2] / "data"


def five_weeks(tmp_path: Path) -> Path:
    """A data folder of the 30-minute trace's last five weeks: enough for weekly seasons,
    fast to fit."""
    source = DATA / "nyc_taxi_passengers_30min.csv"
    lines = source.read_text().splitlines()
    data = tmp_path / "data"
    data.mkdir()
    (data / source.name).write_text("\n".join([lines[0], *lines[-35 * 48 :]]) + "\n")
    return data


def _entry(kind: str, p50: float, p90: float, cov: float = 0.9) -> dict[str, Any]:
    return {"kind": kind, "pinball": {"0.5": p50, "0.9": p90}, "coverage": {"0.9": cov}}


def _dataset(lgbm: tuple[float, float, float], rival: tuple[float, float]) -> dict[str, Any]:
    models = {"lightgbm": _entry("prewarm", *lgbm)}
    models |= {name: _entry("prewarm", *rival) for name in BASELINE_RIVALS}
    models |= {name: _entry("peer", *rival) for name in PEERS}
    models["hist-gbm"] = _entry("prewarm", 0.1, 0.1)  # not a rival the target names
    return {"kind": "real", "models": models}


def test_target_met_with_four_wins_and_coverage_in_band_everywhere() -> None:
    datasets = {t.name: _dataset((1.0, 1.0, 0.9), (2.0, 2.0)) for t in TRACES}
    datasets[TRACES[0].name] = _dataset((3.0, 1.0, 0.86), (2.0, 2.0))  # loses at q0.5 once
    verdict = check_target(datasets)
    assert verdict["met"] and verdict["wins"] == 4 and verdict["coverage_ok"] == 5
    assert not verdict["traces"][TRACES[0].name]["beats_all"]
    assert verdict["traces"][TRACES[0].name]["0.5"]["best_rival_pinball"] == 2.0


@pytest.mark.parametrize(
    ("lost", "coverage", "wins", "covered"),
    [(2, 0.9, 3, 5), (0, 0.96, 5, 4), (0, 0.84, 5, 4)],
    ids=["three-wins", "over-covers", "under-covers"],
)
def test_target_not_met(lost: int, coverage: float, wins: int, covered: int) -> None:
    datasets = {t.name: _dataset((1.0, 1.0, 0.9), (2.0, 2.0)) for t in TRACES}
    for trace in TRACES[:lost]:
        datasets[trace.name] = _dataset((1.0, 2.5, 0.9), (2.0, 2.0))  # loses at q0.9
    datasets[TRACES[-1].name]["models"]["lightgbm"]["coverage"]["0.9"] = coverage
    verdict = check_target(datasets)
    assert not verdict["met"]
    assert (verdict["wins"], verdict["coverage_ok"]) == (wins, covered)
    assert verdict["text"].startswith("Target NOT met")


def test_target_is_not_claimed_when_a_rival_or_a_trace_is_missing() -> None:
    datasets = {t.name: _dataset((1.0, 1.0, 0.9), (2.0, 2.0)) for t in TRACES}
    del datasets[TRACES[1].name]["models"]["statsforecast-mstl"]
    verdict = check_target(datasets)
    assert not verdict["met"] and "statsforecast-mstl" in verdict["text"]
    del datasets[TRACES[2].name]
    assert "only 4 of the 5 real traces" in check_target(datasets)["text"]


@pytest.mark.slow
def test_quick_run_writes_markdown_and_json_with_every_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("statsforecast", reason="optional extra: pip install -e '.[bench]'")
    pytest.importorskip("mlforecast", reason="optional extra: pip install -e '.[bench]'")
    data, out = five_weeks(tmp_path), tmp_path / "results"

    plot = tmp_path / "lead.png"
    argv = ["--quick", "--no-scenarios", "--data-dir", str(data), "--out", str(out)]
    assert main([*argv, "--plot", str(plot)]) == 0
    assert plot.stat().st_size > 0
    # Not a terminal: the bar draws nothing, so each finished model is a line on stderr.
    assert "nyc_taxi_passengers_30min: lightgbm done (1 refits)" in capsys.readouterr().err

    report = json.loads((out / "forecast_accuracy.json").read_text())
    dataset = report["datasets"]["nyc_taxi_passengers_30min"]
    assert (dataset["horizon_cells"], dataset["horizon_seconds"]) == (1, 1800)
    assert dataset["window_cells"] == [1, 2]  # 10 minutes ahead plus a 10-minute hold
    assert dataset["evaluation"]["origins"] == 48
    assert set(dataset["models"]) == set(MODELS) | set(PEERS) | {
        HINDSIGHT,
        AUTO_HOURLY,
        SHORT_WINDOWS,
        COMBINATION_SHORT_WINDOWS,
    }
    for name, entry in dataset["models"].items():
        assert "error" not in entry, f"{name}: {entry.get('error')}"
        assert entry["scored"] == 48, name
        kind = "peer" if name in PEERS else HINDSIGHT if name == HINDSIGHT else "prewarm"
        assert entry["kind"] == kind
        for value in (entry["mase"], *entry["pinball"].values(), entry["coverage"]["0.9"]):
            assert math.isfinite(value), name
        assert entry["window_pinball"]["0.9"] > 0, name
        assert 0 <= entry["window_coverage"]["0.9"] <= 1, name
    # the window target's forecast is its own, not the largest per-horizon quantile; both
    # window models serve the same refitted per-horizon forecasts
    models = dataset["models"]
    windowed, shift = models["lightgbm-window"], models["lightgbm-window-shift"]
    assert windowed["pinball"] == shift["pinball"]
    assert windowed["window_pinball"] != models["lightgbm"]["window_pinball"]
    assert windowed["window_pinball"] != shift["window_pinball"]
    # the hour's phase reaches the twin's forecasts
    assert models[HOURLY_MODEL]["pinball"] != windowed["pinball"]
    assert report["target"]["met"] is False  # one trace cannot meet a five-trace target
    markdown = (out / "forecast_accuracy.md").read_text()
    for name in dataset["models"]:
        assert f"| {name}" in markdown
    assert "| win pinball q0.9 | win cov q0.9 |" in markdown
    assert report["target"]["text"] in markdown


def test_combinations_are_compared_with_lightgbm_trace_by_trace() -> None:
    datasets = {t.name: _dataset((1.0, 2.0, 0.9), (2.0, 2.0)) for t in TRACES[:2]}
    datasets[TRACES[0].name]["models"]["combination"] = _entry("prewarm", 1.0, 1.5)
    datasets[TRACES[1].name]["models"]["combination"] = {"kind": "prewarm", "error": "boom"}
    rows = combined_rows(datasets)
    assert rows == {TRACES[0].name: {"combination": 0.75}, TRACES[1].name: {}}


def test_the_short_trace_runs_alone_at_its_own_step(tmp_path: Path) -> None:
    out = tmp_path / "results"
    argv = ["--traces", SHORT.name, "--models", "ewma,intermittent", "--peers", ""]
    assert main([*argv, "--no-scenarios", "--data-dir", str(DATA), "--out", str(out)]) == 0

    # some models of one trace: a report of its own, the full one untouched
    assert not (out / "forecast_accuracy.json").exists()
    report = json.loads((out / "forecast_accuracy_subset.json").read_text())
    assert list(report["datasets"]) == [SHORT.name]
    dataset = report["datasets"][SHORT.name]
    assert (dataset["kind"], dataset["step_seconds"], dataset["horizon_cells"]) == ("short", 1, 30)
    assert dataset["evaluation"]["origins"] == SHORT.eval_seconds
    for name in ("ewma", "intermittent"):
        entry = dataset["models"][name]
        assert "error" not in entry, entry
        assert all(math.isfinite(v) for v in entry["pinball"].values())
    markdown = (out / "forecast_accuracy_subset.md").read_text()
    assert f"| {SHORT.name} | 1 s | 30 s (30 cells) | ewma |" in markdown
    assert "only 0 of the 5 real traces" in report["target"]["text"]


def test_an_unknown_trace_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        main(["--traces", "nope", "--no-scenarios"])


def test_averaged_boosters_run_beside_their_single_model(tmp_path: Path) -> None:
    data, out = five_weeks(tmp_path), tmp_path / "results"
    argv = ["--quick", "--no-scenarios", "--models", "ewma,lightgbm", "--peers", ""]
    assert main([*argv, "--n-seeds", "2", "--data-dir", str(data), "--out", str(out)]) == 0

    report = json.loads((out / "forecast_accuracy_n_seeds2.json").read_text())
    models = report["datasets"]["nyc_taxi_passengers_30min"]["models"]
    # only the boosting model gets an averaged twin, on the same origins
    assert set(models) == {"ewma", "lightgbm", "lightgbm n_seeds=2", HINDSIGHT}
    single, pair = models["lightgbm"], models["lightgbm n_seeds=2"]
    assert pair["kind"] == "prewarm" and pair["scored"] == single["scored"] == 48
    assert pair["pinball"] != single["pinball"]  # the second booster reaches the forecast
    assert "| lightgbm n_seeds=2 |" in (out / "forecast_accuracy_n_seeds2.md").read_text()
    assert not (out / "forecast_accuracy.json").exists()


@pytest.mark.parametrize("bad", ["0", "two"])
def test_a_bad_booster_count_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--n-seeds", bad])
    assert refused.value.code == 2
    assert f"--n-seeds takes a whole number >= 1, got {bad!r}" in capsys.readouterr().err


def test_auto_with_the_hours_phase_runs_only_beside_auto() -> None:
    assert auto_hourly(["ewma", DEFAULT_MODEL]) == {}
    (name, (kind, factory)), *rest = auto_hourly(["ewma", "auto"]).items()
    assert (name, kind, rest) == (AUTO_HOURLY, "prewarm", [])
    model = factory(name, horizons=(1, 2), quantiles=(0.5, 0.9))
    assert (model.method, model.candidates) == ("select", (*SELECT_CANDIDATES, HOURLY_MODEL))
    assert HOURLY_MODEL in MODELS


def test_the_short_windows_run_only_beside_the_default_model_and_the_combination() -> None:
    assert short_windows(["ewma", "auto"]) == {}
    (name, (kind, factory)), *rest = short_windows(["ewma", DEFAULT_MODEL]).items()
    assert (name, kind, rest) == (SHORT_WINDOWS, "prewarm", [])
    params = {"horizons": (1, 2), "quantiles": (0.5, 0.9)}
    assert (
        factory(name, **params).get_params()
        == make_model(DEFAULT_MODEL, **params)
        .set_params(features=SHORT_WINDOW_FEATURES)
        .get_params()
    )
    # the default's windows and shorter ones: the level and spread of the last 10 minutes
    assert set(FeatureConfig().windows) < set(SHORT_WINDOW_FEATURES.windows)
    assert min(parse_duration(w) for w in SHORT_WINDOW_FEATURES.windows) == 600


def test_the_combination_with_short_windows_declares_them() -> None:
    assert list(short_windows(["combination", DEFAULT_MODEL])) == [
        SHORT_WINDOWS,
        COMBINATION_SHORT_WINDOWS,
    ]
    (name, (kind, factory)), *rest = short_windows(["combination"]).items()
    assert (name, kind, rest) == (COMBINATION_SHORT_WINDOWS, "prewarm", [])
    model = factory(name, horizons=(1, 2), quantiles=(0.5, 0.9))
    assert model.get_params()["features"] == SHORT_WINDOW_FEATURES


def test_no_averaged_twin_below_two_boosters() -> None:
    assert averaged(["lightgbm", "ewma"], 1) == {}
    assert list(averaged(["lightgbm", "ewma", "hist-gbm"], 3)) == [
        "lightgbm n_seeds=3",
        "hist-gbm n_seeds=3",
    ]
    assert results_stem(1) == "forecast_accuracy"
    assert results_stem(4) == "forecast_accuracy_n_seeds4"
    assert results_stem(1, 7.0) == "forecast_accuracy"
    assert results_stem(4, 14.0) == "forecast_accuracy_n_seeds4_14days"
    assert results_stem(1, subset=True) == "forecast_accuracy_subset"
    assert results_stem(1, 14.0, subset=True) == "forecast_accuracy_14days"


@pytest.mark.parametrize("bad", ["0", "-2", "two", "nan", "inf"])
def test_a_bad_scored_span_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--eval-days", bad])
    assert refused.value.code == 2
    assert f"--eval-days takes a number of days > 0, got {bad!r}" in capsys.readouterr().err


def _scored(kind: str, p90: float, cov: float, win: float, win_cov: float) -> dict[str, Any]:
    return {
        "kind": kind,
        "pinball": {"0.5": 1.0, "0.9": p90},
        "coverage": {"0.9": cov},
        "window_pinball": {"0.9": win},
        "window_coverage": {"0.9": win_cov},
    }


def _lead_data(ours: float) -> dict[str, Any]:
    """One trace: prewarm's calibrated model at ``ours``, a better one covering too little,
    a failed one and two peers (the best at 1.0)."""
    return {
        "kind": "real",
        "models": {
            "lightgbm-window": _scored("prewarm", ours, 0.90, ours, 0.91),
            "auto": _scored("prewarm", 0.5 * ours, 0.80, 0.5 * ours, 0.95),  # out of band
            "mstl": {"kind": "prewarm", "error": "ConfigError: no"},
            "statsforecast-mstl": _scored("peer", 1.0, 0.8, 2.0, 0.8),
            "mlforecast-lightgbm": _scored("peer", 1.5, 0.9, 1.6, 0.8),
        },
    }


def test_the_lead_is_prewarms_best_calibrated_model_over_the_best_peer() -> None:
    datasets = {t.name: _lead_data(0.85) for t in TRACES}
    datasets[TRACES[0].name] = _lead_data(0.95)
    datasets["viral-launch"] = {**_lead_data(0.1), "kind": "synthetic"}  # not counted
    verdict = check_lead(datasets)
    assert (verdict["met"], verdict["wins"]) == (True, 4)
    row = verdict["traces"][TRACES[1].name]
    assert (row["model"], row["peer"]) == ("lightgbm-window", "statsforecast-mstl")
    assert row["lead"] == pytest.approx(0.15) and row["met"]
    assert verdict["traces"][TRACES[0].name]["lead"] == pytest.approx(0.05)
    assert "viral-launch" not in verdict["traces"]
    # on the window the best peer is another one, and the lead its own
    window = check_lead(datasets, window=True)["traces"][TRACES[1].name]
    assert window["peer"] == "mlforecast-lightgbm"
    assert window["lead"] == pytest.approx(1 - 0.85 / 1.6)
    datasets[TRACES[2].name] = _lead_data(0.95)
    assert (check_lead(datasets)["met"], check_lead(datasets)["wins"]) == (False, 3)


def test_the_lead_is_rendered_and_plotted(tmp_path: Path) -> None:
    datasets = {t.name: _lead_data(0.85) for t in TRACES}
    text = "\n".join(lead_markdown(datasets))
    assert "| lightgbm-window 0.85 (0.900) | statsforecast-mstl 1 | +15.0% |" in text
    assert "5 of 5 traces lead by at least 10% (needs 4): met" in text
    path = tmp_path / "lead.png"
    figure(datasets).savefig(path)
    assert path.stat().st_size > 0
    assert lead_markdown({}) == []


def test_the_hindsight_yardstick_is_measured_beside_the_lead_never_in_it() -> None:
    datasets = {t.name: _lead_data(0.85) for t in TRACES}
    for name, share in zip(datasets, (0.5, 0.95, 0.5, 0.5, 0.5), strict=True):
        # better than every model: were it prewarm's or a peer, it would be the best of either
        datasets[name]["models"][HINDSIGHT] = _scored(HINDSIGHT, share, 0.9, 0.3, 0.9)
    verdict = check_lead(datasets)
    assert (verdict["met"], verdict["wins"]) == (True, 5)
    row = verdict["traces"][TRACES[0].name]
    assert (row["model"], row["peer"], row["lead"]) == (
        "lightgbm-window",
        "statsforecast-mstl",
        pytest.approx(0.15),
    )
    assert row["hindsight_lead"] == pytest.approx(0.5)
    assert check_lead(datasets, window=True)["traces"][TRACES[0].name][
        "hindsight_lead"
    ] == pytest.approx(1 - 0.3 / 1.6)
    text = "\n".join(lead_markdown(datasets))
    assert "| +15.0% |  | +50.0% |" in text
    assert f"by less than 10% on {TRACES[1].name} (+5.0%)" in text


def _full(kind: str, loss: float) -> dict[str, Any]:
    """A report entry with every column the table shows, each loss ``loss``."""
    levels = {"0.5": loss, "0.9": loss}
    return {
        **_entry(kind, loss, loss),
        "mase": loss,
        "relative_pinball": levels,
        "window_pinball": levels,
        "window_coverage": {"0.9": 0.9},
        "fit_seconds": 1.0,
        "predict_seconds": 1.0,
    }


def test_the_hindsight_yardstick_is_never_bold_nor_a_rival() -> None:
    data = _dataset((1.0, 1.0, 0.9), (2.0, 2.0))
    data["models"] = {
        name: _full(e["kind"], e["pinball"]["0.9"]) for name, e in data["models"].items()
    }
    data |= {"step_seconds": 300, "horizon_seconds": 600, "horizon_cells": 2}
    data["models"][HINDSIGHT] = _full(HINDSIGHT, 0.5)  # lower than every model's loss
    rows = {cells[3]: marks for cells, marks in table_rows({TRACES[0].name: data})}
    assert rows[HINDSIGHT] == set()
    assert rows["hist-gbm"] == {5, 6, 10}  # the best of prewarm's and the peers' (0.1)
    verdict = check_target({TRACES[0].name: data})["traces"][TRACES[0].name]
    assert verdict["0.9"]["best_rival"] != HINDSIGHT and verdict["beats_all"]


def test_block_losses_sum_each_refit_block_of_the_scored_span() -> None:
    start = pd.Timestamp("2024-01-01")
    forecasts = pd.DataFrame(
        {
            "origin": start + pd.to_timedelta([0, 1, 24, 30, 31], unit="h"),
            "actual": [10.0, 10.0, 10.0, 10.0, 10.0],
            "q0.5": [10.0, 12.0, 8.0, 10.0, 10.0],
            "q0.9": [8.0, 12.0, 10.0, 14.0, float("nan")],  # no forecast: not scored
        }
    )
    blocks = block_losses(forecasts, start, 86400)
    # q0.9: under by 2 costs 0.9 * 2, over by 2 costs 0.1 * 2, over by 4 costs 0.1 * 4
    assert blocks["0.9"] == [[pytest.approx(2.0), 2], [pytest.approx(0.4), 2]]
    assert blocks["0.5"] == [[pytest.approx(1.0), 2], [pytest.approx(1.0), 3]]


def test_the_leads_interval_redraws_the_same_days_for_both_sides() -> None:
    peer = [[10.0, 288], [20.0, 288], [30.0, 288], [40.0, 288]]
    halved = [[5.0, 288], [10.0, 288], [15.0, 288], [20.0, 288]]
    assert lead_interval(halved, peer) == pytest.approx((0.5, 0.5))  # half on every day
    # ahead on two days, behind on two: the point lead lies inside a wide interval
    mixed = [[2.0, 288], [4.0, 288], [45.0, 288], [60.0, 288]]
    low, high = lead_interval(mixed, peer)  # type: ignore[misc]
    point = 1 - 111 / 100
    assert low < point < high and low < -0.3 and high > 0.3
    assert lead_interval(mixed, peer) == (low, high)  # a fixed seed: the report reproduces
    assert lead_interval(halved[:3], peer) is None  # not scored on the same days
    assert lead_interval(halved[:1], peer[:1]) is None  # one day: nothing to redraw


def test_the_lead_carries_its_interval_per_horizon() -> None:
    datasets = {t.name: _lead_data(0.85) for t in TRACES}
    models = datasets[TRACES[0].name]["models"]
    models["lightgbm-window"]["block_pinball"] = {"0.9": [[0.8, 1], [0.88, 1], [0.85, 1]]}
    models["statsforecast-mstl"]["block_pinball"] = {"0.9": [[1.0, 1], [1.0, 1], [1.0, 1]]}
    row = check_lead(datasets)["traces"][TRACES[0].name]
    low, high = row["interval"]
    assert 0.12 - 1e-9 <= low <= row["lead"] <= high <= 0.2 + 1e-9
    assert check_lead(datasets, window=True)["traces"][TRACES[0].name]["interval"] is None
    assert check_lead(datasets)["traces"][TRACES[1].name]["interval"] is None  # none kept
    text = "\n".join(lead_markdown(datasets))
    assert f"| +15.0% | {low:+.1%} to {high:+.1%} |" in text
    assert f"stays at 10% or more on {TRACES[0].name}; on no other its interval" in text


def test_a_longer_scored_span_keeps_a_loss_per_day(tmp_path: Path) -> None:
    data, out = five_weeks(tmp_path), tmp_path / "results"
    argv = ["--no-scenarios", "--models", "ewma", "--peers", "", "--eval-days", "2"]
    argv += ["--traces", "nyc_taxi_passengers_30min"]
    assert main([*argv, "--data-dir", str(data), "--out", str(out)]) == 0
    report = json.loads((out / "forecast_accuracy_2days.json").read_text())
    assert report["settings"]["eval_days"] == 2.0
    ewma = report["datasets"]["nyc_taxi_passengers_30min"]["models"]["ewma"]
    assert ewma["scored"] == 96  # two days of half-hour origins
    blocks = ewma["block_pinball"]["0.9"]
    assert [rows for _, rows in blocks] == [48, 48]
    assert sum(total for total, _ in blocks) / 96 == pytest.approx(ewma["pinball"]["0.9"])
    assert not (out / "forecast_accuracy.json").exists()
