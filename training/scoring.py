"""Score a fitted model on a recent window: forecast accuracy and backtest cost at SLO.

Every origin of the window gets a forecast from data up to that origin only (the model's
contract), exactly as the live service would have issued it. The forecasts then drive the
backtester's policies through the simulated cluster, so the model is judged in the unit the
operator pays in: the cost of the cheapest setting that meets each workload's SLO.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from forecaster.backtest.frontier import PolicyPoint, headline_costs, headlines, sweep
from forecaster.backtest.run import observe, score_forecast, seconds_of_day
from forecaster.exceptions import NotEnoughHistoryError
from forecaster.metrics import coverage
from forecaster.models.base import BaseForecaster
from forecaster.policies import Observation, QuantileForecast
from forecaster.policies.predictive import QUANTILE_GRID
from forecaster.workload import WorkloadPolicy
from training.compute import map_calls

if TYPE_CHECKING:
    from distributed import Client


@dataclass(frozen=True)
class WorkloadScore:
    """How one model did on one workload over the window.

    ``pinball`` is the mean pinball loss over the backtest's quantile grid and the horizons
    of the workload's lead window, divided by the window's mean demand so workloads of any
    size weigh alike. ``coverage`` is per quantile, pooled over those horizons.
    """

    workload: str
    tau: float
    pinball: float
    pinball_by_horizon: dict[int, float]
    coverage: dict[float, float]
    mae: float
    costs: dict[str, float | None]
    unserved: dict[str, float]
    meets_slo: dict[str, bool]
    frontier: dict[str, list[PolicyPoint]] = field(repr=False)
    observation: Observation = field(repr=False)
    times: pd.DatetimeIndex = field(repr=False)

    @property
    def coverage_at_tau(self) -> float:
        """Empirical coverage of the quantile the workload plans with."""
        for q, value in self.coverage.items():
            if math.isclose(q, self.tau):
                return value
        return math.nan


@dataclass(frozen=True)
class ModelScore:
    """A model's scores on every workload of the window."""

    workloads: dict[str, WorkloadScore]
    start: pd.Timestamp
    end: pd.Timestamp

    def mean_pinball(self, names: Sequence[str] | None = None) -> float:
        """Mean scale-free pinball loss over ``names`` (default all)."""
        names = list(self.workloads) if names is None else list(names)
        return float(np.mean([self.workloads[n].pinball for n in names]))

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """Flat ``{name: value}`` for MLflow (per workload, per horizon, per quantile)."""
        out: dict[str, float] = {f"{prefix}pinball_mean": self.mean_pinball()}
        for name, score in self.workloads.items():
            base = f"{prefix}{name}."
            out[base + "pinball"] = score.pinball
            out[base + "mae"] = score.mae
            out[base + "coverage_at_tau"] = score.coverage_at_tau
            for h, value in score.pinball_by_horizon.items():
                out[f"{base}pinball.h{h}"] = value
            for q, value in score.coverage.items():
                out[f"{base}coverage.q{q:g}"] = value
            for policy, cost in score.costs.items():
                if cost is not None:
                    out[f"{base}cost_at_slo.{policy}"] = cost
                out[f"{base}unserved.{policy}"] = score.unserved[policy]
        return out


def scored_sample(
    policies: Mapping[str, WorkloadPolicy], frame: pd.DataFrame, limit: int | None
) -> list[str]:
    """The workloads a fold scores: all of them, or ``limit`` spread over tiers and sizes.

    Scoring simulates every policy's sweep per workload, the largest share of a large fleet's
    training time. A sample keeps the gate's verdict representative: each tier gets its share
    of the fleet, and within a tier the workloads are picked at even intervals of mean demand
    from its smallest to its largest, so every band of demand is scored. No draw is random:
    the same fleet and data give the same sample.
    """
    names = sorted(set(policies) & set(frame["series"].astype(str)))
    if limit is None or len(names) <= limit:
        return names
    level = frame.groupby("series", observed=True)["value"].mean()
    tiers: dict[int, list[str]] = {}
    for name in sorted(names, key=lambda n: (float(level[n]), n)):
        tiers.setdefault(policies[name].spec.tier, []).append(name)
    # Each tier's share of the sample is its share of the fleet (largest remainder).
    shares = {tier: limit * len(members) / len(names) for tier, members in tiers.items()}
    quota = {tier: int(share) for tier, share in shares.items()}
    by_remainder = sorted(shares, key=lambda t: (quota[t] - shares[t], t))
    for tier in by_remainder[: limit - sum(quota.values())]:
        quota[tier] += 1
    sample: list[str] = []
    for tier, members in tiers.items():
        if quota[tier]:  # even intervals of demand, the tier's smallest and largest included
            picks = np.linspace(0, len(members) - 1, quota[tier]).round().astype(int)
            sample.extend(members[i] for i in picks)
    return sorted(sample)


def score_model(
    model: BaseForecaster,
    frame: pd.DataFrame,
    start: pd.Timestamp,
    workloads: Mapping[str, WorkloadPolicy],
    *,
    policies: Sequence[str],
    seed: int = 0,
    client: Client | None = None,
) -> ModelScore:
    """Forecast every origin from ``start`` on and simulate ``policies`` with the forecasts.

    Parameters
    ----------
    model
        Fitted forecaster; its horizons cover every workload's lead window.
    frame
        Long frame of every workload: history before ``start`` (context for the features)
        and the evaluation window from ``start`` to the end.
    start
        First evaluated cell (UTC).
    workloads
        Workload name -> policy: its spec (cold start, capacity, SLO) is simulated, its lead
        window picks the horizons scored and its quantile is the one whose coverage counts.
    policies
        Backtest policies to sweep (forecast-driven ones use ``model``'s forecasts).
    seed
        Seed of the simulated cold starts.
    client
        A Dask client: each workload's policy sweep runs on its cluster's workers
        (:func:`training.compute.map_calls`); the scores are those of a local run.
    """
    step = int(model.step_)
    frame = frame.sort_values(["series", "timestamp"], ignore_index=True)
    times = pd.DatetimeIndex(frame.loc[frame["series"] == frame["series"].iloc[0], "timestamp"])
    first = int(times.searchsorted(start))
    if not 0 < first < len(times) - 1:
        raise NotEnoughHistoryError(
            f"the evaluation window must start inside the history ({times[0]} .. {times[-1]}), "
            f"got {start}"
        )
    origins = times[first - 1 : len(times) - 1]
    forecast = model.predict(frame, origins=origins)
    spanned = model.predict_window(frame, origins=origins)
    horizons = tuple(int(h) for h in model.horizons)
    quantiles = tuple(float(q) for q in model.quantiles)
    accuracy: dict[str, _Accuracy] = {}
    for name, part in frame.groupby("series", sort=True):
        name = str(name)
        values = part["value"].to_numpy(dtype=float)
        own = forecast[forecast["series"] == name]
        window = None if spanned is None else spanned[spanned["series"] == name]
        # the policies plan on the window target where it fits, as the served plan does
        forecasts = QuantileForecast.from_long(own, window, times, horizons, quantiles)
        policy = workloads[name]
        low, high = policy.horizon_range(step)
        scored = [h for h in horizons if low <= h <= high] or [horizons[0]]
        accuracy[name] = _accuracy(values, times, first, step, policy, forecasts, scored)
    # The sweep simulates every policy's grid on each workload: most of the scoring time.
    # Each workload's is pure and independent of the others, so with a client it runs on
    # the cluster's workers; the result is the same either way.
    calls = {name: (found.observation, list(policies)) for name, found in accuracy.items()}
    frontiers = dict(map_calls(partial(sweep, seed=seed), calls, client))
    scores = {
        name: _scored(name, workloads[name], found, frontiers[name])
        for name, found in accuracy.items()
    }
    return ModelScore(scores, times[first], times[-1])


@dataclass(frozen=True)
class _Accuracy:
    """One workload's forecast scores, and the observation its policies are simulated on."""

    pinball_by_horizon: dict[int, float]
    coverage: dict[float, float]
    mae: float
    observation: Observation
    times: pd.DatetimeIndex


def _accuracy(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    first: int,
    step: int,
    workload: WorkloadPolicy,
    forecasts: QuantileForecast,
    scored: list[int],
) -> _Accuracy:
    cube, horizons, quantiles = forecasts.values, forecasts.horizons, forecasts.quantiles
    level = float(np.nanmean(values[first:])) or 1.0
    level = level if math.isfinite(level) and level > 0 else 1.0
    grid = [q for q in quantiles if any(math.isclose(q, g) for g in QUANTILE_GRID)]
    by_horizon, pooled_actual, pooled_pred = {}, [], []
    for h in scored:
        k = horizons.index(h)
        # The backtest's lead-horizon score, at each horizon of the workload's lead window.
        at_h = score_forecast(
            values, QuantileForecast(cube[:, k : k + 1, :], (h,), quantiles), first, step
        )
        by_horizon[h] = float(np.mean([at_h.pinball[q] for q in grid]) / level)
        j = np.arange(first - 1, len(values) - h)
        pooled_actual.append(values[j + h])
        pooled_pred.append(cube[j, k, :])
    # Pooled over the lead window, and an origin without a forecast counts as a miss: the
    # gate's coverage and MAE are not the backtest's lead-horizon ones.
    actual = np.concatenate(pooled_actual)
    predicted = np.concatenate(pooled_pred)
    median = int(np.argmin(np.abs(np.array(quantiles) - 0.5)))
    keep = np.isfinite(actual) & np.isfinite(predicted[:, median])
    mae = float(np.mean(np.abs(actual[keep] - predicted[keep, median]))) if keep.any() else math.nan
    obs = observe(
        values,
        step,
        first,
        workload.spec,
        forecast=forecasts,
        train_window=first,
        retrain_every=len(values) - first,
        day_offset=seconds_of_day(times[0]),
    )
    return _Accuracy(
        pinball_by_horizon=by_horizon,
        coverage={q: float(coverage(actual, predicted[:, i])) for i, q in enumerate(quantiles)},
        mae=mae,
        observation=obs,
        times=times,
    )


def _scored(
    name: str,
    workload: WorkloadPolicy,
    accuracy: _Accuracy,
    frontier: dict[str, list[PolicyPoint]],
) -> WorkloadScore:
    headline = headlines(frontier, workload.spec.slo_unserved_fraction)
    return WorkloadScore(
        workload=name,
        tau=workload.tau,
        pinball=float(np.mean(list(accuracy.pinball_by_horizon.values()))),
        pinball_by_horizon=accuracy.pinball_by_horizon,
        coverage=accuracy.coverage,
        mae=accuracy.mae,
        costs=headline_costs(headline),
        unserved={
            policy: float(point.metrics.unserved_fraction)
            for policy, (point, _) in headline.items()
        },
        meets_slo={policy: ok for policy, (_, ok) in headline.items()},
        frontier=frontier,
        observation=accuracy.observation,
        times=accuracy.times,
    )
