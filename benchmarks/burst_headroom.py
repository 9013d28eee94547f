"""Where hybrid's gap to the oracle comes from on the seeded scenarios: the bursts.

The scenarios (:data:`forecaster.scenarios.SCENARIOS`) add short bursts, 2-6x for 5-20
minutes, 1.5 a day, at times drawn uniformly at random: nothing before a burst announces it.
On the backtest of ``benchmarks/backtest_savings.py`` (28 days at 1 minute, cold start 5 min,
capacity per replica the p99 of demand / 20, SLO 0.1 % of the work unserved within 30 s, each
setting tuned on the first half of the scored span and scored on the second), each scenario
is run four ways:

- **model**: hybrid planned on the model's forecasts, as deployed;
- **burst-blind foresight**: hybrid planned on the future demand itself with the bursts
  divided out (:func:`forecaster.scenarios.burst_factor`) as every quantile and the window
  forecast, tuned the same way: a forecaster that knew all but the bursts;
- **foresight x k**: that plan with headroom ``k`` (the forecast path at utilization
  ``1/k``) beside a reactive path at utilization ``u``: the cheapest ``(k, u)`` of
  :data:`HEADROOM` x :data:`REACTIVE_PATH` that meets the SLO on validation, chosen with
  hindsight;
- **without bursts**: the same draw with the bursts divided out, backtested with the model.

Each is reported as its validation cost over the oracle's and its unserved fraction. Where
the foresight needs ``k`` times the demand to hold the SLO, no better forecast of the rest
brings hybrid under about ``k`` times the oracle: the rest is the warm capacity the bursts
need.

Run: ``.venv/bin/python benchmarks/burst_headroom.py [--model lightgbm] [--scenarios a,b]``.
Writes ``benchmarks/results/burst_headroom.md`` and ``.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if __name__ == "__main__" and not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.backtest_savings import (
    add_tuning_margin,
    backtest_settings,
    workload,
    write_results,
)
from benchmarks.traces import chosen_traces
from forecaster.backtest.run import BacktestResult, backtest, lead_forecast
from forecaster.backtest.tuning import TUNING_MARGIN, Deployed, rule_text, score_setting
from forecaster.frame import regularize
from forecaster.models import DEFAULT_MODEL
from forecaster.policies import QuantileForecast
from forecaster.scenarios import SCENARIOS, START, burst_factor

RESULTS = Path(__file__).resolve().parent / "results"
POLICIES = ("reactive", "hybrid", "oracle")
DAYS, STEP, SEED = 28, 60, 0
# Headroom over the foreseen demand, fine enough to place the SLO within a quarter, and the
# reactive path beside it, from eager (catching the long bursts) to only above capacity.
HEADROOM = tuple(round(1.0 + 0.25 * i, 2) for i in range(29))  # 1 to 8
REACTIVE_PATH = (0.3, 0.5, 0.8, 1.0)


def scenario(name: str) -> tuple[np.ndarray, pd.DatetimeIndex, np.ndarray]:
    """A scenario as the savings benchmark builds it: demand, times, and the bursts' factor
    at each of its cells."""
    frame = regularize(SCENARIOS[name](DAYS, STEP, SEED), STEP)
    times = pd.DatetimeIndex(frame["timestamp"])
    cells = ((times - START).total_seconds().to_numpy() // STEP).astype(int)
    factor = burst_factor(DAYS, STEP, SEED)[cells]
    return frame["value"].to_numpy(dtype=float), times, factor


def foresight(forecast: QuantileForecast, future: np.ndarray) -> QuantileForecast:
    """``forecast`` with every quantile replaced by the demand it forecast, ``future[j + h]``
    for horizon ``h`` of origin ``j``, and the window target by the largest of them. The
    model's own forecast stays where that demand is unknown (no data, or past the end), and
    where the model issued none, so do the policies' inputs."""
    n = len(future)
    targets = np.arange(n)[:, None] + np.asarray(forecast.horizons)[None, :]
    known = np.where(targets < n, future[np.minimum(targets, n - 1)], np.nan)
    values = _where_known(known[:, :, None], forecast.values)
    window = None
    if forecast.window is not None:
        largest = known.max(axis=1)  # NaN when any of the window is unknown
        window = _where_known(largest[:, None], forecast.window)
    return QuantileForecast(values, forecast.horizons, forecast.quantiles, window)


def _where_known(known: np.ndarray, model: np.ndarray) -> np.ndarray:
    keep = np.isnan(known) | np.isnan(model)
    return np.where(keep, model, known)


def cheapest_meeting(scores: Sequence[Deployed]) -> Deployed | None:
    """The cheapest score whose validation meets the SLO; None when none does."""
    meeting = [s for s in scores if s.meets_slo]
    return min(meeting, key=lambda s: s.validation.cost, default=None)


def headroom_setting(k: float, u: float) -> dict[str, float]:
    """Hybrid planning on a forecast ``k`` times the demand foreseen, beside a reactive path
    at ``u``: every quantile is the same foreseen demand, so the median stands for all."""
    return {
        "quantile": 0.5,
        "forecast_utilization": 1 / k,
        "target_utilization": u,
        "tolerance": 0.1,
        "buffer_quantile": 0.0,
    }


def _point(chosen: Deployed, oracle: float) -> dict[str, Any]:
    """A setting's validation cost, over the oracle's, its unserved fraction and whether it
    met the SLO."""
    cost = chosen.validation.cost
    return {
        "cost": cost,
        "over_oracle": cost / oracle,
        "unserved_fraction": chosen.validation.unserved_fraction,
        "meets_slo": chosen.meets_slo,
        "settings": chosen.params,
    }


def _deployed(result: BacktestResult, policy: str) -> dict[str, Any]:
    return _point(result.deployed[policy], result.deployed["oracle"].validation.cost)


def run(name: str, model: str, tuning_margin: float = TUNING_MARGIN) -> dict[str, Any]:
    """One scenario, the four ways of the module's docstring."""
    began = time.perf_counter()
    values, times, factor = scenario(name)
    settings = backtest_settings(workload(values), POLICIES, model, tuning_margin)
    forecast = lead_forecast(values, times, STEP, settings)
    with_model = backtest(values, times, STEP, settings, forecast=forecast)
    calm = values / factor
    foreseen = backtest(values, times, STEP, settings, forecast=foresight(forecast, calm))
    scores = [
        score_setting(foreseen.observation, "hybrid", headroom_setting(k, u), settings.seed)
        for k in HEADROOM
        for u in REACTIVE_PATH
    ]
    oracle = with_model.deployed["oracle"].validation.cost
    found = cheapest_meeting(scores)
    headroom = None
    if found is not None:
        k = round(1 / found.params["forecast_utilization"], 2)
        headroom = {"k": k, "u": found.params["target_utilization"]} | _point(found, oracle)
    without = backtest(calm, times, STEP, settings)
    return {
        "oracle": oracle,
        "reactive": _deployed(with_model, "reactive"),
        "model": _deployed(with_model, "hybrid"),
        "foresight": _deployed(foreseen, "hybrid"),
        "headroom": headroom,
        "without_bursts": _deployed(without, "hybrid"),
        "seconds": time.perf_counter() - began,
    }


def _cell(point: dict[str, Any] | None) -> str:
    if point is None:
        return f"none up to k = {HEADROOM[-1]:g}"
    missed = "" if point["meets_slo"] else ", misses the SLO"
    return (
        f"{point['cost']:,.0f} ({point['over_oracle']:.2f}x), "
        f"{point['unserved_fraction']:.3%}{missed}"
    )


def markdown(results: dict[str, dict[str, Any]], model: str, tuning_margin: float) -> str:
    """The comparison as a Markdown report."""
    seconds = sum(r["seconds"] for r in results.values())
    lines = [
        "# Bursts: the headroom foresight of everything else still needs",
        "",
        f"Forecast model `{model}`; the scenarios at 28 days x 1 minute, cold start 5 min, "
        "capacity per replica = p99 of demand / 20, SLO 0.1 % of the work unserved within "
        f"30 s; each setting the cheapest that {rule_text(tuning_margin)} on the first half "
        "of the scored span, scored on the second. Cells: validation cost (over the oracle's), "
        f"unserved fraction. Generated by `benchmarks/burst_headroom.py` in {seconds:,.0f} s.",
        "",
        "- *model*: hybrid on the model's forecasts, as deployed;",
        "- *burst-blind foresight*: hybrid planned on the future demand with the bursts "
        "divided out, tuned the same way;",
        "- *foresight x k*: that plan at headroom k beside a reactive path at utilization u, "
        "the cheapest (k, u) meeting the SLO on validation (chosen with hindsight);",
        "- *without bursts*: the same draw with the bursts divided out, hybrid on the model.",
        "",
        "| scenario | oracle | reactive | hybrid, model | hybrid, burst-blind foresight "
        "| foresight x k | k, u | without bursts: hybrid |",
        "|---|---:|---|---|---|---|---:|---|",
    ]
    for name, r in results.items():
        h = r["headroom"]
        k = "-" if h is None else f"{h['k']:g}, {h['u']:g}"
        lines.append(
            f"| {name} | {r['oracle']:,.0f} | {_cell(r['reactive'])} | {_cell(r['model'])} "
            f"| {_cell(r['foresight'])} | {_cell(r['headroom'])} | {k} "
            f"| {_cell(r['without_bursts'])} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; unknown scenarios exit 2, naming them."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    add_tuning_margin(parser)
    parser.add_argument("--out", type=Path, default=RESULTS / "burst_headroom")
    args = parser.parse_args(argv)
    args.names = chosen_traces(parser, list(SCENARIOS), args.scenarios, "scenarios")
    return args


def main() -> None:
    args = parse_args()
    results = {}
    for name in args.names:
        results[name] = run(name, args.model, args.tuning_margin)
        print(f"{name}: {results[name]['seconds']:.0f} s", file=sys.stderr, flush=True)
    write_results(args.out, results, markdown(results, args.model, args.tuning_margin))


if __name__ == "__main__":
    main()
