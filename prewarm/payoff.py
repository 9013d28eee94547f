"""Where prediction pays: the best predictive policy against the tuned reactive HPA, over a
range of cold starts.

A short cold start lets the reactive HPA catch up with demand by itself; past some cold start
only a forecast meets the SLO, or meets it for less. :func:`sweep` backtests one series at
each cold start, every policy tuned on the first half of the scored span and scored on the
second, and :func:`compare` and :func:`where_it_stops` say where that line lies. ``prewarm
backtest --cold-start-sweep`` prints it for a user's data; ``benchmarks/cold_start_sweep.py``
for the public traces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from prewarm import tables
from prewarm.spans import duration_text

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from forecaster.backtest.run import BacktestResult, BacktestSettings, Progress
    from forecaster.policies import QuantileForecast

# Every other policy plans on some prediction of demand; the oracle's is perfect, so it is
# the bound, not a contender.
NOT_PREDICTIVE = frozenset({"static", "reactive", "oracle"})
PAYS, DOES_NOT_PAY = "pays", "does not pay"
# A static fleet may still meet the SLO there: the verdict is between reactive and prediction.
NONE_MEETS = "neither reactive nor prediction meets the SLO"


def compare(deployed: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The best predictive policy against the tuned reactive HPA, on validation.

    The best predictive policy is the cheapest that meets the SLO on validation; savings
    are ``1 - cost / reactive's cost`` where both meet it. ``verdict`` says whether
    prediction pays: it does where it is cheaper or where only it meets the SLO.

    Examples
    --------
    >>> row = lambda cost, ok: {"cost": cost, "meets_slo": ok}
    >>> result = compare({"reactive": row(100.0, True), "hybrid": row(90.0, True),
    ...                   "predictive": row(80.0, False), "oracle": row(70.0, True)})
    >>> result["best_predictive"], round(result["saving"], 3), result["verdict"]
    ('hybrid', 0.1, 'pays')
    """
    costs = {p: row["cost"] for p, row in deployed.items() if row["meets_slo"]}
    contenders = {p: c for p, c in costs.items() if p not in NOT_PREDICTIVE}
    best = min(contenders, key=contenders.__getitem__, default=None)
    reactive = costs.get("reactive")

    def saving(policy: str | None) -> float | None:
        if policy not in contenders or not reactive:
            return None
        return 1.0 - contenders[policy] / reactive

    if best is None:
        verdict = DOES_NOT_PAY if reactive is not None else NONE_MEETS
    else:
        verdict = PAYS if reactive is None or contenders[best] < reactive else DOES_NOT_PAY
    return {
        "best_predictive": best,
        "saving": saving(best),
        "hybrid_saving": saving("hybrid"),
        "reactive_meets_slo": reactive is not None,
        "verdict": verdict,
    }


def where_it_stops(verdicts: Mapping[int, str]) -> str:
    """One sentence per trace: the cold starts at which prediction pays and where it stops.

    The crossover is stated where every cold start at which prediction does not pay is
    shorter than every one at which it pays; those where neither side meets the SLO say
    nothing about it and are listed apart.

    Examples
    --------
    >>> where_it_stops({5: "does not pay", 60: "does not pay", 300: "pays", 600: "pays"})
    'pays from a 5m cold start up; does not pay at 1m and below'
    >>> where_it_stops({5: "pays", 300: "does not pay"})
    'pays at 5s; does not pay at 5m'
    >>> where_it_stops({5: "does not pay", 120: "pays", 300: NONE_MEETS})
    'pays at 2m; does not pay at 5s and below; neither reactive nor prediction meets the SLO at 5m'
    """
    ordered = sorted(verdicts)
    paying = [c for c in ordered if verdicts[c] == PAYS]
    losing = [c for c in ordered if verdicts[c] == DOES_NOT_PAY]
    neither = [c for c in ordered if verdicts[c] == NONE_MEETS]
    if not paying:
        return "does not pay at any cold start swept (" + _grouped(verdicts) + ")"
    if losing and max(losing) > min(paying):
        return _grouped(verdicts)
    # "From X up" only where every longer cold start pays too: else the ones that do.
    upward = all(verdicts[c] == PAYS for c in ordered if c >= min(paying))
    head = (
        f"pays from a {duration_text(min(paying))} cold start up"
        if upward
        else "pays at " + ", ".join(map(duration_text, paying))
    )
    if losing:
        text = f"{head}; does not pay at {duration_text(max(losing))} and below"
    else:
        text = "pays at every cold start swept where either side meets the SLO"
    if neither:
        text += f"; {NONE_MEETS} at " + ", ".join(map(duration_text, neither))
    return text


def verdicts(rows: Mapping[Any, Mapping[str, Any]]) -> dict[int, str]:
    """Cold start (seconds) -> :func:`compare`'s verdict there, from :func:`sweep`'s rows
    (keyed by seconds, or by their text in a JSON document)."""
    return {int(c): row["verdict"] for c, row in rows.items()}


def _grouped(verdicts: Mapping[int, str]) -> str:
    groups: dict[str, list[int]] = {}
    for cold_start in sorted(verdicts):
        groups.setdefault(verdicts[cold_start], []).append(cold_start)
    return "; ".join(
        f"{verdict} at {', '.join(map(duration_text, starts))}"
        for verdict, starts in groups.items()
    )


def cold_start_row(result: BacktestResult) -> dict[str, Any]:
    """One backtest at one cold start: each policy deployed, the lowest unserved fraction it
    reaches out of sample (its setting with the least unserved work on the tuning window,
    scored on validation), the policies skipped, and :func:`compare`'s verdict."""
    from forecaster.backtest.tuning import VALIDATION, safest
    from prewarm.backtest_report import deployed_row

    deployed = {policy: deployed_row(chosen) for policy, chosen in result.deployed.items()}
    return {
        "deployed": deployed,
        "lowest_unserved": {
            p: safest(points).windows[VALIDATION].unserved_fraction
            for p, points in result.frontier.items()
        },
        "skipped": result.skipped,
        **compare(deployed),
    }


def sweep(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    step: int,
    settings: BacktestSettings,
    cold_starts: Sequence[int],
    progress: Progress | None = None,
) -> dict[int, dict[str, Any]]:
    """:func:`cold_start_row` at each of ``cold_starts`` (seconds), ``settings`` otherwise.

    The walk-forward forecasts are computed once per distinct lead window and shared by the
    cold starts that have it (:func:`forecaster.backtest.run.lead_forecast`): each backtest is
    the one :func:`~forecaster.backtest.run.backtest` computes alone.
    """
    from forecaster.backtest.run import backtest, lead_forecast, lead_horizons
    from forecaster.policies import FORECAST_POLICIES

    needs_forecast = bool(FORECAST_POLICIES & set(settings.policies))
    forecasts: dict[tuple[int, int], QuantileForecast] = {}
    rows = {}
    for cold_start in cold_starts:
        at = replace(settings, spec=replace(settings.spec, cold_start=cold_start))
        forecast = None
        if needs_forecast:
            window = lead_horizons(at, step)
            if window not in forecasts:
                forecasts[window] = lead_forecast(values, times, step, at, progress)
            forecast = forecasts[window]
        result = backtest(values, times, step, at, progress, forecast=forecast)
        rows[cold_start] = cold_start_row(result)
    return rows


def _cost_cell(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row["meets_slo"]:
        return f"{row['cost']:,.0f}"
    return f"misses ({row['unserved_fraction']:.3%})"


def sweep_table(rows: Mapping[int, Mapping[str, Any]]) -> tables.TableSpec:
    """The sweep as a report table (:mod:`prewarm.tables`): per cold start, the tuned
    reactive HPA, hybrid, the cheapest predictive policy meeting the SLO, its saving over the
    reactive HPA and the verdict; the crossover below."""
    lines = []
    for cold_start in sorted(rows):
        row = rows[cold_start]
        deployed = row["deployed"]
        best = row["best_predictive"]
        saving = row["saving"]
        lines.append(
            (
                duration_text(cold_start),
                [
                    _cost_cell(deployed.get("reactive")),
                    _cost_cell(deployed.get("hybrid")),
                    "-" if best is None else f"{best} {deployed[best]['cost']:,.0f}",
                    "-" if saving is None else f"{saving:+.1%}",
                    row["verdict"],
                ],
            )
        )
    return tables.TableSpec(
        title="Where prediction pays, deployed out of sample: the cheapest predictive policy "
        "meeting the SLO against the tuned reactive HPA, per cold start",
        key="cold start",
        headers=("reactive", "hybrid", "best\npredictive", "saving vs\nreactive", "prediction"),
        rows=lines,
        notes=[f"Prediction {where_it_stops(verdicts(rows))}."],
        left=("best\npredictive", "prediction"),
    )
