"""Forecast accuracy on the public traces: prewarm's models beside the peers a user would pick.

Run (needs the ``bench`` extra: ``pip install -e '.[dev,bench]'``)::

    .venv/bin/python benchmarks/forecast_accuracy.py [--data-dir ../shared/data]
        [--out benchmarks/results] [--models a,b] [--peers a,b] [--traces a,b] [--quick]
        [--no-scenarios] [--n-seeds 4] [--eval-days 14] [--plot docs/forecast-accuracy.png]

For each of the five demand-like traces of the data directory (see its README) and the two
synthetic scenarios, every registered prewarm model and every peer (:mod:`benchmarks.peers`)
goes through :func:`forecaster.evaluation.evaluate` with the settings of ``prewarm evaluate``:
rolling origin over the last 7 days, every origin scored 10 minutes ahead (2 cells of 5-minute
data, 1 cell of 30-minute data), refit every day on all data before. Prints one table, writes
``forecast_accuracy.md`` and ``forecast_accuracy.json`` into ``--out``, and checks issue 2's
target: the LightGBM model beats seasonal naive, EWMA and every peer in pinball loss at q0.5 and
q0.9 on at least 4 of the 5 traces, with q0.9 coverage in [0.85, 0.95] on each.

Every contender forecasts each horizon of the window ``[t + 10 min, t + 20 min]`` (a 10-minute
hold past the lead): the window columns score the forecast a capacity plan sizes for (a
``target: window`` model's window forecast, else the largest of its per-horizon quantiles, as
prewarm plans without one and as a peer's forecasts would be planned on) against the largest
demand of the window.

The short trace (:data:`SHORT`, an hour of LLM arrivals counted per second) runs with its own
settings: the last 20 minutes scored 30 seconds ahead, refit every 5 minutes on all data
before, a 10-second hold; it is reported beside the others and left out of the target, which
is about days.

The report also measures the lead over the peers (:func:`check_lead`): per trace, prewarm's
best calibrated model at q0.9 against the best peer, per horizon and on the window, drawn in
``docs/forecast-accuracy.png`` after a full run (``--plot`` elsewhere); and the 95% range of
the per-horizon lead over the scored days redrawn with replacement (:func:`lead_interval`,
from each model's loss per refit block, ``block_pinball`` in the JSON). Beside each lead, the
same ratio for :class:`benchmarks.hindsight.Hindsight`, a yardstick that reads the demand
either side of its target: how much lead knowing the level around the target would take.

The registered models include ``lightgbm-window-hourly``, the default model with the hour's
phase among its features (the minute of the hour, the demand one hour before the target);
beside ``auto`` runs :data:`AUTO_HOURLY`, ``auto`` with that model among its candidates: the
hour's phase chosen per workload on its validation window, the way a user would serve it.
Beside the default model runs :data:`SHORT_WINDOWS`, the same with trailing windows from 10
minutes (:data:`SHORT_WINDOW_FEATURES`), as a user declares them in ``model.features``, and
beside ``combination`` :data:`COMBINATION_SHORT_WINDOWS`, the combination with them.

``--eval-days D`` scores the last D days instead of 7 (and writes
``forecast_accuracy_<D>days``): a longer span narrows the lead's interval, at the cost of a
shorter history before the first refit. A run of some models, peers or traces writes
``forecast_accuracy_subset`` and leaves the full report and its plot alone.

``--n-seeds N`` adds, beside each boosting model of ``--models``, the same model averaging N
boosters per quantile (its ``n_seeds``), on the same folds, and writes
``forecast_accuracy_n_seeds<N>``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

if __name__ == "__main__" and not __package__:
    # Run as a script: make the repository root importable for `benchmarks.peers`.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.hindsight import Hindsight
from benchmarks.model_seed import n_seeds_arg
from benchmarks.peers import PEERS, make_peer
from benchmarks.progress import announce
from benchmarks.traces import TRACES, chosen_traces
from forecaster.backtest.plots import legend_below
from forecaster.evaluation import RollingOrigin, evaluate
from forecaster.features import FeatureConfig
from forecaster.frame import regularize, validate_frame
from forecaster.metrics import pinball_losses
from forecaster.models import DEFAULT_MODEL, MODELS, averages_boosters, make_model
from forecaster.models.base import quantile_column
from forecaster.scenarios import SCENARIOS
from prewarm.evaluate import (
    DEFAULT_QUANTILES,
    horizon_cells,
    season_cells,
    window_cells,
    window_horizons,
)
from training.sources.file import load_history

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
DEFAULT_OUT = ROOT / "benchmarks" / "results"

HORIZON_SECONDS = 600
HOLD_SECONDS = 600
EVAL_DAYS = 7.0
REFIT_EVERY_SECONDS = 86400
QUICK_EVAL_DAYS = 1.0
QUICK_TRACES = 2
SCENARIO_DAYS, SCENARIO_STEP, SCENARIO_SEED = 28, 300, 0

TARGET_MODEL = "lightgbm"
BASELINE_RIVALS = ("seasonal-naive-daily", "seasonal-naive-weekly", "ewma")
COVERAGE_BAND = (0.85, 0.95)
TARGET_WINS = 4
LEVELS = tuple(f"{q:g}" for q in DEFAULT_QUANTILES)
COMBINED = ("combination", "auto", "mstl")  # compared with TARGET_MODEL trace by trace
# The lead over the peers a user would notice: prewarm's best calibrated model at least 10%
# under the best peer's q0.9 pinball loss on 4 of the 5 traces, its coverage in this band.
LEAD, LEAD_WINS, LEAD_BAND = 0.10, 4, (0.87, 0.93)
# The lead's interval: days of the scored span drawn with replacement, the same days for both
# sides, this many times from this seed (a fixed seed: the report is reproducible).
LEAD_DRAWS, LEAD_SEED, LEAD_INTERVAL = 2000, 0, (0.025, 0.975)
PLOT = ROOT / "docs" / "forecast-accuracy.png"
# The default model with the hour's phase among its features: the minute of the hour and the
# demand one hour before the target. Opt-in, not the default: the plan does not follow its
# lower loss (benchmarks/results/backtest_savings_hourly.md, model_seed_viral_launch_hourly.md).
HOURLY_MODEL = "lightgbm-window-hourly"
# `auto` with HOURLY_MODEL among its candidates: it serves the hour's phase to the workloads
# whose validation window says so. One configuration for every trace, not a pick per trace.
AUTO_HOURLY = "auto hourly"
# The default model with trailing windows from 10 minutes (2 cells of 5-minute data) beside
# its 30 minutes, 2 and 12 hours: the recent level and spread a 10-minute forecast moves with.
# A declared configuration (`model.features`), not the default (see its note in NOTES).
SHORT_WINDOWS = "lightgbm-window short windows"
# The same windows in the combination's boosting candidates: one configuration for every
# trace, where the default model with them leads on one trace and the combination on others.
COMBINATION_SHORT_WINDOWS = "combination short windows"
SHORT_WINDOW_FEATURES = FeatureConfig(windows=("10m", "15m", "30m", "1h", "2h", "12h"))
# The yardstick that reads the demand around its target (benchmarks/hindsight.py): neither
# prewarm's nor a peer, never a rival and never bold.
HINDSIGHT = "hindsight"


@dataclass(frozen=True)
class ShortTrace:
    """A trace of hours at a step of seconds, scored on its own (short) windows."""

    name: str
    file: str
    horizon_seconds: int
    eval_seconds: int
    refit_seconds: int
    hold_seconds: int


SHORT = ShortTrace(
    "azure_llm_conv_requests_1s", "azure_llm_conv_requests_1s.csv", 30, 1200, 300, 10
)


NOTES = (
    "Same evaluation code as `prewarm evaluate` (`forecaster.evaluation.evaluate`, "
    "`RollingOrigin`): origins are every grid cell of the last {eval_days:g} day(s); each is "
    "scored {horizon_min} minutes ahead, which is 2 cells of 5-minute data and 1 cell (so 30 "
    "minutes) of the 30-minute nyc_taxi trace; every model is refit at the start of each day "
    "on all data up to that instant and forecasts that day's origins from data up to each "
    "origin only.",
    "MASE is scaled by the in-sample one-day seasonal naive error of the data before the "
    "evaluation window; `rel` columns divide the pinball loss by the mean of the scored values.",
    "statsforecast AutoETS (season one day = 288 or 48 cells): refit once a day on the last 3 "
    "days only; the ETS form (the library's ZZZ search over error, trend, season and damping) "
    "is selected at the first refit of each series and its parameters re-estimated at every "
    "later one, because the search costs 20-300 s per fit at a 288-cell season and one form a "
    "few seconds. Between refits the library's `forward` re-runs the fitted model (parameters "
    "and initial states frozen) over the data up to each origin.",
    "statsforecast MSTL (daily season, plus weekly where the last 28 days hold two weeks; trend "
    "by the library's default `AutoETS(model='ZZN')`): the decomposition and the trend model "
    "are refit once a day on the last 28 days. `MSTL.forward` re-decomposes on every call (tens "
    "of seconds per origin), so per origin only the trend model moves forward (`forward` on the "
    "data minus the seasonal components, which repeat their last cycle past the refit, as "
    "`MSTL.predict` does). STL uses R's default interpolation jumps (window/10) instead of "
    "statsmodels' exact smoothing, to keep a decomposition near one second.",
    "mlforecast + LightGBM: features built by `MLForecast.preprocess` (lags h..h+11, one day and "
    "one week; rolling mean/std of lag h over 12 cells and a rolling mean over one day; hour and "
    "day of week of the target), models refit daily with `fit_models`. Every lag is at least "
    "the horizon h, so the model is direct and free of look-ahead. Quantiles come from "
    "LightGBM's quantile objective (one model per level, LightGBM's default 100 trees), not "
    "from conformal intervals.",
    "Peers' q0.5 is the mean forecast (statsforecast) or the q0.5 model (mlforecast); "
    "statsforecast's q0.9 is the upper bound of its 80% interval. Every forecast, prewarm's "
    "and the peers', is clipped at zero and sorted across quantiles. Gaps are forward-filled "
    "before the peer libraries see the data (none accepts NaN); cells with no observed value "
    "are never scored.",
    "The LightGBM row is plain `lightgbm`, the per-horizon model the target above names; "
    f"prewarm's default model is `{DEFAULT_MODEL}`. Every boosting model is as registered, "
    "with its conformal calibration on the last 3 days of each refit's training data; nothing "
    "is tuned per trace.",
    f"`{HOURLY_MODEL}` is `{DEFAULT_MODEL}` with the hour's phase among its features: the "
    "minute of the hour of the target time and the demand one hour before it (seasonal lag "
    "`1h`), beside the calendar and the daily and weekly seasonal lags it has by default. "
    f"`{AUTO_HOURLY}` is `auto` with `{HOURLY_MODEL}` among its candidates, one configuration "
    "that serves the hour's phase to a workload when its validation window says so. A user "
    "opts into either by naming it; the default model keeps its features because the "
    "plan does not follow the lower loss: with them the savings backtest's tuned hybrid costs "
    "9.5% less on office-hours and within 0.3% elsewhere, misses the viral launch's SLO, and "
    "holds it on 4 of 12 model seeds against 5 (`benchmarks/results/backtest_savings_hourly.md`, "
    "`model_seed_viral_launch_hourly.md`).",
    f"`{SHORT_WINDOWS}` is `{DEFAULT_MODEL}` with the trailing windows "
    f"{', '.join(SHORT_WINDOW_FEATURES.windows)} (the default: "
    f"{', '.join(FeatureConfig().windows)}), as a user declares them "
    "(`model.features: {{windows: [...]}}`); a window under two cells is dropped, so on the "
    "30-minute nyc_taxi trace it adds 1h alone. A configuration, not the default: with it the "
    "savings backtest's tuned hybrid costs the same on five traces, 3.6% more on asg_cpu and "
    "4.8% less on office-hours, and misses the viral launch's SLO "
    "(`benchmarks/results/backtest_savings_short_windows.md`). "
    f"`{COMBINATION_SHORT_WINDOWS}` is `combination` with the same windows handed to its "
    "boosting candidates: one configuration for every trace.",
    "Window columns: every contender forecasts each horizon of [t + {horizon_min} min, t + "
    "{window_end_min} min] (the lead plus a {hold_min}-minute hold; 2..4 cells of 5-minute data, "
    f"1..2 of 30-minute data; a {SHORT.hold_seconds} s hold on {SHORT.name}) on the same folds. "
    "`win pinball` and `win cov` score the forecast a "
    "plan over that window sizes for, against the largest demand in it: the window target of a "
    "`target: window` model (`lightgbm-window`, `lightgbm-window-shift`), else the largest of "
    "the per-horizon quantiles (prewarm's plan without one, and a peer's forecasts planned the "
    "same way). Origins whose window runs past the data are not window-scored.",
    "`combination` weighs `lightgbm-window`, the same with the hour's phase and `mstl` per "
    "series and quantile by pinball loss on the last day of each refit's training data (288 "
    "cells where a day holds fewer: six days on nyc_taxi; a quarter of it on the short trace), "
    "the candidates fitted before that window; `auto` picks, among LightGBM, "
    "`lightgbm-window`, seasonal naive (weekly), EWMA and `mstl`, the one whose window "
    "forecast (what the plan sizes for) has the lowest "
    "mean pinball there, of those covering the windows within three standard errors of the top "
    "quantile (0.053 over a day of 5-minute windows). Both then refit the candidates they use "
    "on all of the training data. `mstl` is prewarm's own "
    "daily/weekly decomposition with an EWMA level; it and `ewma` fit the EWMA's half-life "
    "per series on the training data.",
    f"{SHORT.name}: one hour at 1-second steps; the last {SHORT.eval_seconds // 60} minutes "
    f"are scored {SHORT.horizon_seconds} s ahead, refit every {SHORT.refit_seconds // 60} "
    "minutes on all data before (about 40 minutes at the first refit). No daily season: MASE "
    "is undefined there.",
    "fit/predict seconds are wall-clock totals over all refits on a shared 2-core machine, "
    "with every OpenMP/BLAS pool limited to one thread (scikit-learn's HistGradientBoosting "
    "fitted 5x slower with two threads competing for a busy machine).",
)

ATTRIBUTION = (
    "Traces: Numenta Anomaly Benchmark (nyc_taxi, twitter AMZN, asg CPU; MIT); Azure VM trace "
    "V2 and Google cluster trace 2019 via the DataCenter-Traces-Datasets collection "
    "(Zenodo 10.5281/zenodo.14564847; CC-BY-4.0). Scenarios: `forecaster.scenarios`, "
    f"{SCENARIO_DAYS} days at {SCENARIO_STEP // 60}-minute steps, seed {SCENARIO_SEED}."
)


@dataclass(frozen=True)
class Dataset:
    """A series on its grid, ready for evaluation."""

    name: str
    kind: str  # "real" or "synthetic"
    frame: pd.DataFrame
    step: int
    source: str
    horizon_seconds: int = HORIZON_SECONDS
    eval_seconds: float | None = None  # None: the run's eval_days
    refit_seconds: int = REFIT_EVERY_SECONDS
    hold_seconds: int = HOLD_SECONDS


Factory = Callable[..., Any]


def with_params(model: str, **fixed: Any) -> Factory:
    """A contender's factory: the registered ``model`` with ``fixed`` for its defaults."""
    return lambda _name, **params: make_model(model, **fixed, **params)


def with_features(model: str, features: FeatureConfig) -> Factory:
    """A contender's factory: the registered ``model`` with ``features`` for its defaults."""
    return with_params(model, features=features)


def averaged(names: Sequence[str], n_seeds: int) -> dict[str, tuple[str, Factory]]:
    """``<name> n_seeds=<n>`` contenders: each boosting model of ``names`` averaging
    ``n_seeds`` boosters per quantile (none below 2)."""
    if n_seeds < 2:
        return {}
    boosting = [n for n in names if averages_boosters(n)]
    return {
        f"{n} n_seeds={n_seeds}": ("prewarm", with_params(n, n_seeds=n_seeds)) for n in boosting
    }


def auto_hourly(names: Sequence[str]) -> dict[str, tuple[str, Factory]]:
    """The :data:`AUTO_HOURLY` contender (``auto``, :data:`HOURLY_MODEL` among its
    candidates), when ``auto`` is among ``names``."""
    if "auto" not in names:
        return {}
    candidates = (*make_model("auto").get_params()["candidates"], HOURLY_MODEL)
    return {AUTO_HOURLY: ("prewarm", with_params("auto", candidates=candidates))}


def short_windows(names: Sequence[str]) -> dict[str, tuple[str, Factory]]:
    """The :data:`SHORT_WINDOWS` contender when the default model is among ``names``, and
    :data:`COMBINATION_SHORT_WINDOWS` when ``combination`` is."""
    variants = {DEFAULT_MODEL: SHORT_WINDOWS, "combination": COMBINATION_SHORT_WINDOWS}
    return {
        variant: ("prewarm", with_features(model, SHORT_WINDOW_FEATURES))
        for model, variant in variants.items()
        if model in names
    }


def results_stem(n_seeds: int, eval_days: float | None = None, *, subset: bool = False) -> str:
    """The results' file name: ``_n_seeds<n>`` when boosters were averaged, ``_<d>days``
    when ``--eval-days`` scored other than the default span, else ``_subset`` when only some
    models, peers or traces ran (``subset``), so that such a run leaves the full report alone."""
    stem = "forecast_accuracy" + ("" if n_seeds < 2 else f"_n_seeds{n_seeds}")
    stem += "" if eval_days in (None, EVAL_DAYS) else f"_{eval_days:g}days"
    marked = subset and stem == "forecast_accuracy"  # other stems already say what ran
    return f"{stem}_subset" if marked else stem


def eval_days_arg(text: str) -> float:
    """``--eval-days``: a number of days > 0."""
    try:
        days = float(text)
    except ValueError:
        days = 0.0
    if not 0.0 < days < float("inf"):
        raise argparse.ArgumentTypeError(
            f"--eval-days takes a number of days > 0, got {text[:80]!r}"
        )
    return days


Progress = Callable[[str, int, int], None]


def load_datasets(
    data_dir: Path, *, quick: bool, scenarios: bool, traces: Sequence[str] | None = None
) -> list[Dataset]:
    """The real traces of ``data_dir``, the short trace and the synthetic scenarios.

    The full run needs all five traces; ``quick`` takes the first two that are present;
    ``traces`` names the ones to run (the short trace included).
    """
    present = [t for t in TRACES if (data_dir / t.file).is_file()]
    missing = [t.file for t in TRACES if t not in present]
    short = (data_dir / SHORT.file).is_file() and not quick
    if traces is not None:
        present = [t for t in present if t.name in traces]
        short = (data_dir / SHORT.file).is_file() and SHORT.name in traces
    elif quick:
        present = present[:QUICK_TRACES]
    elif missing:
        raise SystemExit(f"missing traces in {data_dir}: {', '.join(missing)}")
    if not present and not short and not scenarios:
        raise SystemExit(f"no trace of {[t.file for t in TRACES]} found in {data_dir}")
    datasets = []
    for trace in present:
        history = load_history(data_dir / trace.file, value_col=trace.value_col)
        source = trace.file + (f" (column {trace.value_col})" if trace.value_col else "")
        datasets.append(Dataset(trace.name, "real", history.frame, history.step, source))
    if short:
        history = load_history(data_dir / SHORT.file)
        windows = (
            SHORT.horizon_seconds,
            SHORT.eval_seconds,
            SHORT.refit_seconds,
            SHORT.hold_seconds,
        )
        datasets.append(
            Dataset(SHORT.name, "short", history.frame, history.step, SHORT.file, *windows)
        )
    if scenarios:
        for name, make in SCENARIOS.items():
            raw = make(SCENARIO_DAYS, SCENARIO_STEP, SCENARIO_SEED)
            frame = regularize(validate_frame(raw), SCENARIO_STEP)
            source = f"forecaster.scenarios.{name.replace('-', '_')}"
            datasets.append(Dataset(name, "synthetic", frame, SCENARIO_STEP, source))
    return datasets


def splitter_for(dataset: Dataset, eval_days: float) -> RollingOrigin:
    """The folds ``prewarm evaluate`` would use on this dataset."""
    seconds = eval_days * 86400 if dataset.eval_seconds is None else dataset.eval_seconds
    return RollingOrigin(
        horizon=horizon_cells(dataset.horizon_seconds, dataset.step),
        eval_cells=round(seconds / dataset.step),
        refit_every=max(1, round(dataset.refit_seconds / dataset.step)),
    )


def evaluate_dataset(
    dataset: Dataset,
    contenders: dict[str, tuple[str, Factory]],
    eval_days: float,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score every contender on ``dataset``; a contender that fails is reported, not fatal."""
    splitter = splitter_for(dataset, eval_days)
    cells = splitter.horizon
    window = window_cells(dataset.horizon_seconds, dataset.hold_seconds, dataset.step)
    report: dict[str, Any] = {
        "kind": dataset.kind,
        "source": dataset.source,
        "step_seconds": dataset.step,
        "horizon_cells": cells,
        "horizon_seconds": cells * dataset.step,
        "window_cells": list(window),
        "models": {},
    }
    horizons = window_horizons(window)
    for name, (kind, factory) in contenders.items():
        model = factory(name, horizons=horizons, quantiles=DEFAULT_QUANTILES)
        try:
            result = evaluate(
                dataset.frame,
                {name: model},
                splitter,
                step=dataset.step,
                season=season_cells(dataset.step),
                quantiles=DEFAULT_QUANTILES,
                progress=progress,
                window=window,
            )
        # A peer library failing on one trace must not lose an hour of results: record it.
        except Exception as exc:
            report["models"][name] = {"kind": kind, "error": f"{type(exc).__name__}: {exc}"}
            continue
        report["evaluation"] = {
            "start": result.start.isoformat(),
            "end": result.end.isoformat(),
            "origins": result.origins,
            "refit_every_seconds": splitter.refit_every * dataset.step,
        }
        report["mean_actual"] = float(result.forecasts["actual"].mean())
        scores = result.scores.loc[name]
        assert isinstance(scores, pd.Series)  # one row per model name
        report["models"][name] = _entry(kind, scores, len(result.forecasts)) | {
            "block_pinball": block_losses(
                result.forecasts, result.start, splitter.refit_every * dataset.step
            )
        }
    return report


def block_losses(
    forecasts: pd.DataFrame, start: pd.Timestamp, block_seconds: int
) -> dict[str, list[list[float]]]:
    """Per quantile level, the pinball loss summed over each refit block of the scored span
    (a day on the public traces) and the scored rows it sums: ``[[sum, rows], ...]`` in block
    order, what :func:`lead_interval` draws days from."""
    block = ((forecasts["origin"] - start).dt.total_seconds() // block_seconds).astype(int)
    y = forecasts["actual"].to_numpy(dtype=float)
    out = {}
    for q in LEVELS:
        predicted = forecasts[quantile_column(float(q))].to_numpy(dtype=float)
        loss = pd.Series(pinball_losses(y, predicted, float(q))).groupby(block.to_numpy())
        out[q] = [
            [float(total), int(rows)] for total, rows in zip(loss.sum(), loss.count(), strict=True)
        ]
    return out


def lead_interval(
    ours: Sequence[Sequence[float]], peer: Sequence[Sequence[float]]
) -> tuple[float, float] | None:
    """The :data:`LEAD_INTERVAL` percentiles of the lead (one less the ratio of the mean
    pinball losses) over :data:`LEAD_DRAWS` redraws of the scored span's blocks with
    replacement, the same blocks for both sides: how much of the lead is which days were
    scored. None when the two were not scored on the same blocks."""
    a, b = np.asarray(ours, dtype=float), np.asarray(peer, dtype=float)
    if a.shape != b.shape or a.ndim != 2 or len(a) < 2:
        return None
    draws = np.random.default_rng(LEAD_SEED).integers(0, len(a), size=(LEAD_DRAWS, len(a)))
    mean_ours = a[draws, 0].sum(axis=1) / a[draws, 1].sum(axis=1)
    mean_peer = b[draws, 0].sum(axis=1) / b[draws, 1].sum(axis=1)
    low, high = np.quantile(1.0 - mean_ours / mean_peer, LEAD_INTERVAL)
    return float(low), float(high)


def _entry(kind: str, row: pd.Series, scored: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "mae": float(row["mae"]),
        "rmse": float(row["rmse"]),
        "mase": float(row["mase"]),
        "pinball": {q: float(row[f"pinball_{q}"]) for q in LEVELS},
        "relative_pinball": {q: float(row[f"relative_pinball_{q}"]) for q in LEVELS},
        "coverage": {q: float(row[f"coverage_{q}"]) for q in LEVELS},
        "window_pinball": {q: float(row[f"window_pinball_{q}"]) for q in LEVELS},
        "window_coverage": {q: float(row[f"window_coverage_{q}"]) for q in LEVELS},
        "fit_seconds": float(row["fit_seconds"]),
        "predict_seconds": float(row["predict_seconds"]),
        "seconds": float(row["fit_seconds"] + row["predict_seconds"]),
        "scored": scored,
    }


def _ok(entry: dict[str, Any]) -> bool:
    return "error" not in entry


def check_target(datasets: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 2's target on the real traces: where LightGBM beats every rival, and its coverage."""
    real = {name: d for name, d in datasets.items() if d["kind"] == "real"}
    rows, problems = {}, []
    for name, data in real.items():
        models = data["models"]
        target = models.get(TARGET_MODEL)
        rivals = {
            m: e
            for m, e in models.items()
            if _ok(e) and (m in BASELINE_RIVALS or e["kind"] == "peer")
        }
        if target is None or not _ok(target):
            problems.append(f"{name}: {TARGET_MODEL} was not evaluated")
            continue
        row: dict[str, Any] = {}
        for q in LEVELS:
            losses = {m: float(e["pinball"][q]) for m, e in rivals.items()}
            best = min(losses, key=losses.__getitem__) if losses else None
            row[q] = {
                "lightgbm": target["pinball"][q],
                "best_rival": best,
                "best_rival_pinball": losses[best] if best else None,
                "beats": best is None or target["pinball"][q] < losses[best],
            }
        cov = target["coverage"]["0.9"]
        row["beats_all"] = all(row[q]["beats"] for q in LEVELS)
        row["coverage_0.9"] = cov
        row["coverage_ok"] = COVERAGE_BAND[0] <= cov <= COVERAGE_BAND[1]
        rows[name] = row
    expected = {*BASELINE_RIVALS, *(m for m in PEERS)}
    for name, data in real.items():
        absent = sorted(m for m in expected if not _ok(data["models"].get(m, {"error": ""})))
        if absent:
            problems.append(f"{name}: rivals not evaluated: {', '.join(absent)}")
    if len(real) < len(TRACES):
        problems.append(f"only {len(real)} of the {len(TRACES)} real traces were evaluated")
    wins = sum(r["beats_all"] for r in rows.values())
    covered = sum(r["coverage_ok"] for r in rows.values())
    met = not problems and wins >= TARGET_WINS and covered == len(TRACES)
    if problems:
        text = "Target not checkable on this run: " + "; ".join(problems) + "."
    elif met:
        text = (
            f"Target met: LightGBM beats seasonal naive, EWMA and every peer at q0.5 and q0.9 on "
            f"{wins} of {len(TRACES)} real traces, and its q0.9 coverage lies in "
            f"[{COVERAGE_BAND[0]}, {COVERAGE_BAND[1]}] on all of them."
        )
    else:
        text = (
            f"Target NOT met: LightGBM beats seasonal naive, EWMA and every peer at both q0.5 and "
            f"q0.9 on {wins} of {len(TRACES)} real traces (needs {TARGET_WINS}), and its q0.9 "
            f"coverage lies in [{COVERAGE_BAND[0]}, {COVERAGE_BAND[1]}] on {covered} of "
            f"{len(TRACES)} (needs all)."
        )
    return {"met": met, "wins": wins, "coverage_ok": covered, "traces": rows, "text": text}


def _scores(window: bool) -> tuple[str, str]:
    """The report's loss and coverage keys, per horizon or on the window's maximum."""
    return ("window_pinball", "window_coverage") if window else ("pinball", "coverage")


def _calibrated(entry: dict[str, Any], cover: str) -> bool:
    """Whether a model's q0.9 coverage (``cover``) lies in :data:`LEAD_BAND`."""
    return bool(LEAD_BAND[0] <= entry[cover]["0.9"] <= LEAD_BAND[1])


def check_lead(datasets: dict[str, dict[str, Any]], window: bool = False) -> dict[str, Any]:
    """The lead over the peers, trace by trace: prewarm's best model at q0.9 (lowest pinball
    loss among those whose q0.9 coverage lies in :data:`LEAD_BAND`: a model that wins by
    covering too little is not a calibrated forecast) against the best peer; the lead is one
    less their ratio. ``window``: the same on the window's maximum (window pinball, window
    coverage). Real traces only."""
    loss, cover = _scores(window)
    rows: dict[str, dict[str, Any]] = {}
    for name, data in datasets.items():
        if data["kind"] != "real":
            continue
        ok = {m: e for m, e in data["models"].items() if _ok(e)}
        peers = {m: e[loss]["0.9"] for m, e in ok.items() if e["kind"] == "peer"}
        ours = {
            m: e[loss]["0.9"]
            for m, e in ok.items()
            if e["kind"] == "prewarm" and _calibrated(e, cover)
        }
        if not peers or not ours:
            continue
        best, peer = min(ours, key=ours.__getitem__), min(peers, key=peers.__getitem__)
        lead = 1.0 - ours[best] / peers[peer]
        blocks = [ok[m].get("block_pinball", {}).get("0.9") for m in (best, peer)]
        yardstick = ok.get(HINDSIGHT)
        rows[name] = {
            "model": best,
            "pinball": ours[best],
            "coverage": ok[best][cover]["0.9"],
            "peer": peer,
            "peer_pinball": peers[peer],
            "lead": lead,
            # per horizon only: the window's scores are not kept per block
            "interval": None if window or None in blocks else lead_interval(*blocks),
            # the same ratio for the forecast that reads the demand around its target
            "hindsight_lead": None
            if yardstick is None
            else 1.0 - yardstick[loss]["0.9"] / peers[peer],
            "met": lead >= LEAD - 1e-12,
        }
    wins = sum(r["met"] for r in rows.values())
    met = len(rows) == len(TRACES) and wins >= LEAD_WINS
    return {"met": met, "wins": wins, "traces": rows}


# -- rendering -----------------------------------------------------------------------------------
HEADERS = (
    "trace", "step", "horizon", "model", "MASE", "pinball q0.5", "pinball q0.9",
    "rel q0.5", "rel q0.9", "cov q0.9", "win pinball q0.9", "win cov q0.9", "fit s", "predict s",
)  # fmt: skip


def table_rows(datasets: dict[str, dict[str, Any]]) -> list[tuple[list[str], set[int]]]:
    """Cells of the combined table, and which cells hold the trace's best pinball loss."""
    out: list[tuple[list[str], set[int]]] = []
    for name, data in datasets.items():
        ok = {m: e for m, e in data["models"].items() if _ok(e) and e["kind"] != HINDSIGHT}
        best = {q: min((e["pinball"][q] for e in ok.values()), default=None) for q in LEVELS}
        best_window = min((e["window_pinball"]["0.9"] for e in ok.values()), default=None)
        for model, e in data["models"].items():
            head = [
                name,
                _span(data["step_seconds"]),
                f"{_span(data['horizon_seconds'])} ({data['horizon_cells']} cell"
                f"{'s' if data['horizon_cells'] > 1 else ''})",
                model if e["kind"] in ("prewarm", HINDSIGHT) else f"{model} (peer)",
            ]
            if not _ok(e):
                out.append(([*head, "failed: " + e["error"][:60], *[""] * 9], set()))
                continue
            marks = set()
            if e["kind"] != HINDSIGHT:
                marks = {5 + i for i, q in enumerate(LEVELS) if e["pinball"][q] == best[q]}
                marks |= {10} if e["window_pinball"]["0.9"] == best_window else set()
            out.append(
                (
                    [
                        *head,
                        f"{e['mase']:.3f}",
                        *(f"{e['pinball'][q]:.4g}" for q in LEVELS),
                        *(f"{e['relative_pinball'][q]:.4f}" for q in LEVELS),
                        f"{e['coverage']['0.9']:.3f}",
                        f"{e['window_pinball']['0.9']:.4g}",
                        f"{e['window_coverage']['0.9']:.3f}",
                        f"{e['fit_seconds']:.1f}",
                        f"{e['predict_seconds']:.1f}",
                    ],
                    marks,
                )
            )
    return out


def _span(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


def combined_rows(datasets: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Trace -> model of :data:`COMBINED` -> its pinball loss at q0.9 over LightGBM's."""
    out: dict[str, dict[str, float]] = {}
    for name, data in datasets.items():
        models = data["models"]
        target = models.get(TARGET_MODEL)
        if target is None or not _ok(target) or not target["pinball"]["0.9"]:
            continue
        out[name] = {
            m: models[m]["pinball"]["0.9"] / target["pinball"]["0.9"]
            for m in COMBINED
            if m in models and _ok(models[m])
        }
    return out


def render_table(datasets: dict[str, dict[str, Any]]) -> Any:
    """The combined results as one rich table (best pinball per trace in bold green)."""
    from rich.table import Table

    table = Table(title="Forecast accuracy, walk-forward over the last days of each series")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="left" if i < 4 else "right")
    previous = None
    for cells, marks in table_rows(datasets):
        if previous is not None and cells[0] != previous:
            table.add_section()
        previous = cells[0]
        table.add_row(*(f"[bold green]{c}[/]" if i in marks else c for i, c in enumerate(cells)))
    return table


def render_markdown(report: dict[str, Any]) -> str:
    """The whole report as Markdown: table, target check, notes, data attribution."""
    settings = report["settings"]
    lines = [
        "# Forecast accuracy: prewarm's models beside the peers",
        "",
        f"Generated by `benchmarks/forecast_accuracy.py` on {report['generated'][:10]}"
        f"{' (quick run)' if settings['quick'] else ''}, in {report['elapsed_seconds'] / 60:.1f}"
        f" minutes. Walk-forward over the last {settings['eval_days']:g} day(s) of each series, "
        f"scored {settings['horizon_seconds'] // 60} minutes ahead (one 30-minute cell for "
        "30-minute data), refit every day. Best pinball loss per trace in bold (per horizon and "
        "window); "
        "`(peer)` marks the libraries a user would pick instead.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" if i < 4 else "---:" for i in range(len(HEADERS))) + "|",
    ]
    for cells, marks in table_rows(report["datasets"]):
        shown = [f"**{c}**" if i in marks else c for i, c in enumerate(cells)]
        lines.append("| " + " | ".join(shown) + " |")
    verdict = report["target"]
    lines += [
        "",
        "## Issue 2's target on the real traces",
        "",
        "LightGBM must have lower pinball loss at q0.5 and q0.9 than seasonal naive (daily and "
        f"weekly), EWMA and every peer on at least {TARGET_WINS} of the {len(TRACES)} real "
        f"traces, and q0.9 coverage within [{COVERAGE_BAND[0]}, {COVERAGE_BAND[1]}] on each.",
        "",
        "| trace | LightGBM q0.5 | best rival q0.5 | LightGBM q0.9 | best rival q0.9 | "
        "beats all | cov q0.9 | in band |",
        "|---|---:|---|---:|---|---|---:|---|",
    ]
    for name, row in verdict["traces"].items():
        rivals = [
            f"{row[q]['best_rival']} {row[q]['best_rival_pinball']:.4g}"
            if row[q]["best_rival"]
            else "none"
            for q in LEVELS
        ]
        lines.append(
            f"| {name} | {row['0.5']['lightgbm']:.4g} | {rivals[0]} | "
            f"{row['0.9']['lightgbm']:.4g} | {rivals[1]} | "
            f"{'yes' if row['beats_all'] else 'no'} | {row['coverage_0.9']:.3f} | "
            f"{'yes' if row['coverage_ok'] else 'no'} |"
        )
    lines += ["", f"**{verdict['text']}**", ""]
    lines += lead_markdown(report["datasets"])
    ratios = combined_rows(report["datasets"])
    present = [m for m in COMBINED if any(m in r for r in ratios.values())]
    if present:
        lines += [
            "## Combinations beside LightGBM",
            "",
            "Pinball loss at q0.9 over LightGBM's on the same trace (below 1: better).",
            "",
            "| trace | " + " | ".join(present) + " |",
            "|---|" + "---:|" * len(present),
        ]
        for name, row in ratios.items():
            cells = [f"{row[m]:.3f}" if m in row else "" for m in present]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Notes", ""]
    lines += [f"- {note}" for note in report["notes"]]
    lines += [
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".",
        "",
        "## Data",
        "",
        ATTRIBUTION,
        "",
    ]
    return "\n".join(lines)


def lead_markdown(datasets: dict[str, dict[str, Any]]) -> list[str]:
    """The lead over the peers (:func:`check_lead`), per horizon and on the window, as a
    Markdown section; nothing when no real trace has both a peer and a calibrated model."""
    leads = {window: check_lead(datasets, window) for window in (False, True)}
    if not leads[False]["traces"]:
        return []
    low, high = LEAD_BAND
    lines = [
        "## The lead over the peers at q0.9",
        "",
        f"Prewarm's best model (the lowest pinball loss among those whose coverage lies in "
        f"[{low}, {high}]) against the best peer; the lead is one less the ratio of their "
        f"losses. Per horizon it must be at least {LEAD:.0%} on {LEAD_WINS} of the "
        f"{len(TRACES)} traces. A full run plots it in `docs/{PLOT.name}`. The interval is "
        f"the {LEAD_INTERVAL[1] - LEAD_INTERVAL[0]:.0%} range of the per-horizon lead over "
        f"{LEAD_DRAWS} redraws of the scored days with replacement, the same days for both "
        "(the models fixed): how much of a lead the days scored decide. `hindsight` is the "
        "same lead for a forecast that reads the demand either side of its target "
        "(`benchmarks/hindsight.py`: the mean of the cell before and the cell after, plus "
        "offsets learned on the three days before each refit): how much lead knowing the "
        "level around the target would take.",
        "",
        "| trace | per horizon: prewarm's best (cov) | best peer | lead | interval | hindsight | "
        "window: prewarm's best (cov) | best peer | lead | hindsight |",
        "|---|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for name in leads[False]["traces"]:
        cells = []
        for window in (False, True):
            row = leads[window]["traces"].get(name)
            if row is None:
                cells += ["none in band", "", "", ""] + ([] if window else [""])
                continue
            cells += [
                f"{row['model']} {row['pinball']:.4g} ({row['coverage']:.3f})",
                f"{row['peer']} {row['peer_pinball']:.4g}",
                f"{row['lead']:+.1%}",
            ]
            if not window:
                interval = row["interval"]
                cells.append("" if interval is None else "{:+.1%} to {:+.1%}".format(*interval))
            yardstick = row.get("hindsight_lead")
            cells.append("" if yardstick is None else f"{yardstick:+.1%}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    verdict = leads[False]
    lines += [
        "",
        f"**Per horizon, {verdict['wins']} of {len(TRACES)} traces lead by at least "
        f"{LEAD:.0%} (needs {LEAD_WINS}): {'met' if verdict['met'] else 'not met'}.**",
        "",
    ]
    intervals = {n: r["interval"] for n, r in verdict["traces"].items() if r["interval"]}
    if intervals:
        above = [n for n, (low, _) in intervals.items() if low >= LEAD]
        reach = [n for n, (low, high) in intervals.items() if low < LEAD <= high]
        lines += [
            f"Over the redrawn days the lead stays at {LEAD:.0%} or more on "
            f"{', '.join(above) or 'no trace'}; on {', '.join(reach) or 'no other'} its "
            f"interval reaches {LEAD:.0%}; elsewhere the whole interval lies under it.",
            "",
        ]
    yardsticks = {
        n: r["hindsight_lead"]
        for n, r in verdict["traces"].items()
        if r.get("hindsight_lead") is not None
    }
    under = [f"{n} ({lead:+.1%})" for n, lead in yardsticks.items() if lead < LEAD]
    if under:
        lines += [
            f"Per horizon, the hindsight forecast leads the best peer by less than {LEAD:.0%} "
            f"on {', '.join(under)}: there a {LEAD:.0%} lead would take a forecast that knows "
            "the level at its target better than the demand either side of it does.",
            "",
        ]
    elif yardsticks:
        lines += [
            f"Per horizon, the hindsight forecast leads the best peer by {LEAD:.0%} or more on "
            "every trace.",
            "",
        ]
    return lines


def figure(datasets: dict[str, dict[str, Any]]) -> Figure:
    """Every model's q0.9 pinball loss over the best peer's, per horizon and on the window,
    one row per real trace: prewarm's models in grey (hollow where their coverage lies out of
    :data:`LEAD_BAND`), its best calibrated one in green, the peers in orange. Left of the
    dashed line is the lead a user would notice."""
    from matplotlib.figure import Figure

    real = [n for n, d in datasets.items() if d["kind"] == "real"]
    fig = Figure(figsize=(9.0, 0.6 * len(real) + 1.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, window in zip(axes, (False, True), strict=True):
        loss, cover = _scores(window)
        lead = check_lead(datasets, window)["traces"]
        for y, name in enumerate(real):
            ok = {m: e for m, e in datasets[name]["models"].items() if _ok(e)}
            peers = [e[loss]["0.9"] for e in ok.values() if e["kind"] == "peer"]
            if not peers:
                continue
            base = min(peers)
            for model, e in ok.items():
                x = e[loss]["0.9"] / base
                if e["kind"] == "peer":
                    ax.plot(x, y, "^", color="tab:orange", markersize=6, label="peer")
                elif e["kind"] == HINDSIGHT:
                    ax.plot(x, y, "x", color="black", markersize=6,
                            label="hindsight (reads the future)")  # fmt: skip
                elif name in lead and model == lead[name]["model"]:
                    ax.plot(x, y, "o", color="tab:green", markersize=8,
                            label="prewarm's best calibrated")  # fmt: skip
                    ax.annotate(model, (x, y), textcoords="offset points", xytext=(0, 7),
                                fontsize=6, ha="center")  # fmt: skip
                else:
                    inside = _calibrated(e, cover)
                    label = "prewarm" if inside else "prewarm, coverage out of band"
                    fill = "full" if inside else "none"
                    ax.plot(x, y, "o", markersize=4, color="grey", fillstyle=fill, label=label)
        ax.axvline(1.0, color="tab:orange", linewidth=0.8)
        ax.axvline(1.0 - LEAD, color="tab:green", linewidth=0.8, linestyle="--",
                   label=f"{LEAD:.0%} lead")  # fmt: skip
        ax.set_xlim(0.4, 1.6)
        ax.set_title("window maximum" if window else "per horizon", fontsize=9)
        ax.set_xlabel("q0.9 pinball loss / best peer's")
    axes[0].set_yticks(range(len(real)), real, fontsize=7)
    axes[0].invert_yaxis()
    legend_below(fig, axes)
    return fig


def _versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for package in ("prewarm", "lightgbm", "scikit-learn", "statsforecast", "mlforecast"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out


def _names(value: str | None, registry: Sequence[str], what: str) -> list[str]:
    if value is None:
        return list(registry)
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; registered: {', '.join(registry)}")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="traces directory")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where results go")
    parser.add_argument("--models", help=f"prewarm models (default all: {','.join(MODELS)})")
    parser.add_argument(
        "--peers", help=f"peers (default all: {','.join(PEERS)}; empty string for none)"
    )
    parser.add_argument(
        "--traces",
        help="comma-separated trace names to run (default: all; the target needs all five)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK_EVAL_DAYS:g} day of origins, first {QUICK_TRACES} traces",
    )
    parser.add_argument(
        "--eval-days",
        type=eval_days_arg,
        help=f"days of origins scored at the end of each trace (default {EVAL_DAYS:g}; "
        f"--quick: {QUICK_EVAL_DAYS:g}); another span writes forecast_accuracy_<d>days",
    )
    parser.add_argument(
        "--n-seeds",
        type=n_seeds_arg,
        default=1,
        help="also run each boosting model of --models averaging N boosters per quantile "
        "(its n_seeds), beside it; writes forecast_accuracy_n_seeds<N>",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        help="where the figure of the lead over the peers is written (default: "
        f"docs/{PLOT.name} after a full run: every trace, one booster, not --quick)",
    )
    parser.add_argument(
        "--scenarios",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also evaluate the synthetic scenarios",
    )
    args = parser.parse_args(argv)
    names = [*(t.name for t in TRACES), SHORT.name]
    args.traces = chosen_traces(parser, names, args.traces) if args.traces else None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return 0 (the verdict is reported, never an exit status)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from threadpoolctl import threadpool_limits

    args = parse_args(argv)
    models = _names(args.models, list(MODELS), "models")
    contenders: dict[str, tuple[str, Factory]] = {
        **{n: ("prewarm", make_model) for n in models},
        **{n: ("peer", make_peer) for n in _names(args.peers, list(PEERS), "peers")},
        **auto_hourly(models),
        **short_windows(models),
        **averaged(models, args.n_seeds),
        HINDSIGHT: (HINDSIGHT, lambda _name, **params: Hindsight(**params)),
    }
    eval_days = args.eval_days or (QUICK_EVAL_DAYS if args.quick else EVAL_DAYS)
    started = time.perf_counter()
    datasets = load_datasets(
        args.data_dir, quick=args.quick, scenarios=args.scenarios, traces=args.traces
    )
    console = Console()
    if not console.is_terminal:  # a log file: do not squeeze the table into 80 columns
        console = Console(width=200)
    results: dict[str, dict[str, Any]] = {}
    with (
        threadpool_limits(1),
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        ) as bar,
    ):
        blocks = {
            d.name: len(list(splitter_for(d, eval_days).split(d.frame["timestamp"].nunique())))
            for d in datasets
        }
        overall = bar.add_task("refits", total=sum(blocks.values()) * len(contenders))
        for dataset in datasets:
            reported: dict[str, int] = {}

            def advance(
                model: str, done: int, total: int, name: str = dataset.name, seen: Any = reported
            ) -> None:
                seen[model] = done
                bar.update(overall, advance=1, description=f"{name}: {model} block {done}/{total}")
                if done == total and not bar.console.is_terminal:  # a log: the bar draws nothing
                    announce(f"{name}: {model} done ({total} refits)", started)

            results[dataset.name] = evaluate_dataset(dataset, contenders, eval_days, advance)
            for model, entry in results[dataset.name]["models"].items():
                if not _ok(entry):
                    console.print(f"[red]{dataset.name}: {model} failed: {entry['error']}[/]")
                    # Keep the bar honest: count the refits a failed model will never do.
                    bar.update(overall, advance=blocks[dataset.name] - reported.get(model, 0))
    report: dict[str, Any] = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "elapsed_seconds": time.perf_counter() - started,
        "settings": {
            "horizon_seconds": HORIZON_SECONDS,
            "hold_seconds": HOLD_SECONDS,
            "eval_days": eval_days,
            "refit_every_seconds": REFIT_EVERY_SECONDS,
            "quantiles": list(DEFAULT_QUANTILES),
            "quick": args.quick,
        },
        "versions": _versions(),
        "notes": [
            note.format(
                eval_days=eval_days,
                horizon_min=HORIZON_SECONDS // 60,
                hold_min=HOLD_SECONDS // 60,
                window_end_min=(HORIZON_SECONDS + HOLD_SECONDS) // 60,
            )
            for note in NOTES
        ],
        "datasets": results,
    }
    report["target"] = check_target(results)
    console.print(render_table(results))
    style = "bold green" if report["target"]["met"] else "bold red"
    console.print(f"[{style}]{report['target']['text']}[/]")
    args.out.mkdir(parents=True, exist_ok=True)
    subset = any(given is not None for given in (args.models, args.peers, args.traces))
    stem = args.out / results_stem(args.n_seeds, args.eval_days, subset=subset)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    stem.with_suffix(".md").write_text(render_markdown(report))
    console.print(f"wrote {stem}.md and .json")
    full = not (args.quick or subset) and args.n_seeds < 2 and eval_days == EVAL_DAYS
    plot = args.plot or (PLOT if full else None)
    if plot is not None and check_lead(results)["traces"]:
        plot.parent.mkdir(parents=True, exist_ok=True)
        figure(results).savefig(plot, dpi=110)
        console.print(f"wrote {plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
