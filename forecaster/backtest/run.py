"""The whole savings backtest on one demand series: forecasts, sweeps, headline numbers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.backtest.frontier import PolicyPoint, headline_costs, headlines, savings, sweep
from forecaster.backtest.tuning import (
    TUNING_MARGIN,
    VALIDATION,
    Deployed,
    boundary_step,
    check_margin,
    deploy,
    deployed_savings,
    hours,
    split,
)
from forecaster.backtest.walkforward import WalkForward, walk_forward_forecast
from forecaster.exceptions import ConfigError, DataValidationError, NotEnoughHistoryError
from forecaster.frame import DEFAULT_MAX_FILL, long_gaps
from forecaster.metrics import coverage, mase, pinball_loss
from forecaster.models import DEFAULT_MODEL, BaseForecaster, make_model
from forecaster.policies import FORECAST_POLICIES, Observation, QuantileForecast, policy_class
from forecaster.policies.predictive import QUANTILE_GRID
from forecaster.resampling import DEFAULT_SIM_STEP
from forecaster.workload import WorkloadPolicy, WorkloadSpec

Progress = Callable[[str, int, int], None]
DAY = 86400


@dataclass(frozen=True)
class BacktestSettings:
    """What to compare and how.

    Parameters
    ----------
    spec
        The workload.
    policies
        Registered policy names.
    train_window, retrain_every
        Walk-forward windows in seconds.
    model, model_params
        Registered forecast model feeding ``predictive`` and ``hybrid``, and its parameters
        (horizons and quantiles aside): pass the trained model's to backtest what is served.
    hold
        Seconds past the lead the forecast window extends.
    sim_step, seed
        Simulation step and the seed of the cold-start draws and the model.
    max_fill
        Longest run of missing cells scored as its linear interpolation. Longer gaps are
        filled only so the simulation runs through them, and are left out of scoring for
        every policy (see :attr:`Observation.excluded`).
    tuning_margin
        Share of the SLO's unserved work every policy's tuned setting may leave on the
        tuning window (see :func:`forecaster.backtest.tuning.deploy`).
    """

    spec: WorkloadSpec
    policies: tuple[str, ...] = (
        "static",
        "reactive",
        "seasonal-naive",
        "predictive",
        "buffered",
        "hybrid",
        "oracle",
    )
    train_window: int = 14 * DAY
    retrain_every: int = DAY
    model: str = DEFAULT_MODEL
    model_params: Mapping[str, Any] = field(default_factory=dict)
    hold: float = 0.0
    sim_step: float = 15.0
    seed: int = 0
    max_fill: int = DEFAULT_MAX_FILL
    tuning_margin: float = TUNING_MARGIN

    def __post_init__(self) -> None:
        check_margin(self.tuning_margin)
        if self.max_fill < 0:
            raise ConfigError(f"`max_fill` must be >= 0, got {self.max_fill!r}")
        for name in self.policies:
            policy_class(name)
        if not self.policies:
            raise ConfigError("`policies` must name at least one policy, got none")


@dataclass(frozen=True)
class ForecastScore:
    """Accuracy of the walk-forward forecasts at the lead horizon.

    ``mase`` is None when the history has no seasonal naive scale (a day or less of it);
    ``missing`` then gives the reason under ``"mase"``.
    """

    horizon_seconds: int
    mase: float | None
    pinball: dict[float, float]
    coverage: dict[float, float]
    missing: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BacktestResult:
    """Everything the report shows; ``skipped`` gives why each policy left out could not run
    (too little history before the evaluation for it)."""

    observation: Observation
    times: pd.DatetimeIndex
    frontier: dict[str, list[PolicyPoint]]
    headline: dict[str, tuple[PolicyPoint, bool]]
    cost_at_slo: dict[str, float | None]
    savings_at_slo: dict[str, float | None]
    forecast: dict[str, ForecastScore] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    deployed: dict[str, Deployed] = field(default_factory=dict)
    deployed_savings: dict[str, float | None] = field(default_factory=dict)
    validation_start: pd.Timestamp | None = None
    tuning_margin: float = TUNING_MARGIN


def backtest(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    step: int,
    settings: BacktestSettings,
    progress: Progress | None = None,
    forecast: QuantileForecast | None = None,
) -> BacktestResult:
    """Walk forward, sweep every policy, tune each out of sample, and compute the savings.

    Every setting is simulated once over the evaluation span. The in-sample frontier and
    cost at the SLO picture the trade-off; the ``deployed`` numbers are each policy at the
    setting chosen on the tuning window, scored on the later validation window
    (:mod:`forecaster.backtest.tuning`), and the headline savings come from them.

    Parameters
    ----------
    values
        Demand rate per data step (NaN = missing: models skip it, the simulator replays it
        linearly interpolated; runs of more than ``settings.max_fill`` cells are not scored).
    times
        The UTC grid of ``values``.
    step
        Data step in seconds.
    settings
        Policies, windows, model and seed.
    progress
        Called as ``progress(stage, done, total)``.
    forecast
        The walk-forward forecasts of :func:`lead_forecast` for these ``values`` and
        ``settings``, computed once and reused (for example across workloads that differ
        only in settings the forecasts do not depend on); they may hold more horizons than
        the lead window, which alone is read. ``None`` computes them here.
    """
    values = np.asarray(values, dtype=float)
    if np.isnan(values).all():
        raise DataValidationError("the demand series has no values")
    splitter = _splitter(settings, step)
    start = splitter.train_window
    splitter.split(len(values))  # fails early, with the windows, when data is short
    spec = settings.spec
    scores: dict[str, ForecastScore] = {}
    if FORECAST_POLICIES & set(settings.policies):
        first, last = lead_horizons(settings, step)
        if last >= len(values) - start:
            # no forecast's target would lie within the data: nothing to score or plan on
            raise ConfigError(
                f"the lead window (the cold start, the decision delay and the hold: {last} "
                f"steps of {step} s) is as long as the span after the training window "
                f"({len(values) - start} steps): lower `cold_start` or give more data"
            )
        if forecast is None:
            forecast = lead_forecast(values, times, step, settings, progress)
        forecast = _horizons(forecast, first, last, len(values))
        scores[settings.model] = score_forecast(values, forecast, start, step)
    else:
        forecast = None  # no policy reads it: the result is the same with or without it
    obs = observe(
        values,
        step,
        start,
        spec,
        forecast=forecast,
        sim_step=settings.sim_step,
        train_window=splitter.train_window,
        retrain_every=splitter.retrain_every,
        max_fill=settings.max_fill,
        day_offset=seconds_of_day(times[0]),
    )
    if not obs.scored.any():
        raise DataValidationError(
            f"every evaluated cell is in a gap of more than `max_fill`={settings.max_fill} "
            "missing cells: nothing to score"
        )
    n_steps = len(obs.sim_rate)
    windows = split(n_steps, obs.scored)
    frontier, skipped = _sweep_runnable(obs, settings, windows, progress)
    headline = headlines(frontier, spec.slo_unserved_fraction)
    costs = headline_costs(headline)
    deployed = deploy(
        frontier,
        spec.slo_unserved_fraction,
        hours(windows[VALIDATION], obs.sim_step),
        settings.tuning_margin,
    )
    boundary = times[start] + pd.Timedelta(seconds=boundary_step(n_steps) * obs.sim_step)
    return BacktestResult(
        obs, times, frontier, headline, costs, savings(costs), scores, skipped, deployed,
        deployed_savings(deployed), boundary, settings.tuning_margin,
    )  # fmt: skip


def lead_horizons(settings: BacktestSettings, step: int) -> tuple[int, int]:
    """First and last forecast horizon (data steps) the backtest's policies read."""
    return WorkloadPolicy(settings.spec, hold=settings.hold).horizon_range(step)


def lead_forecast(
    values: np.ndarray,
    times: pd.DatetimeIndex,
    step: int,
    settings: BacktestSettings,
    progress: Progress | None = None,
) -> QuantileForecast:
    """The walk-forward forecasts :func:`backtest` plans on: ``settings.model`` refitted on
    its schedule, over the horizons of :func:`lead_horizons` and the quantile grid.

    The forecasts depend on the model, its seed and parameters, the windows and the
    horizons, not on the rest of the workload: backtests whose settings differ only
    elsewhere, or whose cold starts give the same horizons, can share them.
    """
    first, last = lead_horizons(settings, step)
    splitter = _splitter(settings, step)
    return walk_forward_forecast(
        np.asarray(values, dtype=float),
        times,
        lambda h, q: _seeded_model(settings.model, h, q, settings.seed, settings.model_params),
        splitter,
        range(first, last + 1),
        QUANTILE_GRID,
        progress=None if progress is None else lambda d, t: progress("forecasts", d, t),
    )


def _horizons(forecast: QuantileForecast, first: int, last: int, n: int) -> QuantileForecast:
    """``forecast`` restricted to horizons ``first..last``: what :func:`lead_forecast`
    would have returned when it holds them for every one of the ``n`` data steps."""
    wanted = range(first, last + 1)
    missing = sorted(set(wanted) - set(forecast.horizons))
    if missing or len(forecast.values) != n or forecast.quantiles != QUANTILE_GRID:
        raise ConfigError(
            f"the precomputed `forecast` must cover horizons {first}..{last} (data steps) "
            f"with quantiles {list(QUANTILE_GRID)} for each of the {n} data steps; it has "
            f"horizons {list(forecast.horizons)}, quantiles {list(forecast.quantiles)} and "
            f"{len(forecast.values)} rows"
        )
    if forecast.horizons == tuple(wanted):
        return forecast
    columns = [forecast.horizons.index(h) for h in wanted]
    return QuantileForecast(forecast.values[:, columns, :], tuple(wanted), forecast.quantiles)


def _sweep_runnable(
    obs: Observation,
    settings: BacktestSettings,
    windows: dict[str, np.ndarray],
    progress: Progress | None,
) -> tuple[dict[str, list[PolicyPoint]], dict[str, str]]:
    """Sweep each policy; one that needs more history than the trace has before the
    evaluation (seasonal-naive's week) is left out with the reason, so the others still run."""
    frontier: dict[str, list[PolicyPoint]] = {}
    skipped: dict[str, str] = {}
    for name in settings.policies:
        try:
            frontier |= sweep(obs, [name], seed=settings.seed, progress=progress, windows=windows)
        except NotEnoughHistoryError as exc:
            skipped[name] = str(exc)
    if not frontier:
        raise NotEnoughHistoryError(
            "no policy can run on this history: "
            + "; ".join(f"{name}: {reason}" for name, reason in skipped.items())
        )
    return frontier, skipped


def observe(
    values: np.ndarray,
    step: int,
    start: int,
    spec: WorkloadSpec,
    *,
    forecast: QuantileForecast | None = None,
    sim_step: float = DEFAULT_SIM_STEP,
    train_window: int = 0,
    retrain_every: int = 0,
    max_fill: int | None = None,
    day_offset: float = 0.0,
) -> Observation:
    """What the policies of a backtest see of ``values`` from data step ``start`` on.

    Missing cells are filled linearly so the simulation runs through them; the evaluated
    part of each run of more than ``max_fill`` of them is left out of scoring (``None``
    scores every cell, the fill included). ``day_offset``: seconds after UTC midnight of
    the first step (:func:`seconds_of_day` of its timestamp).
    """
    filled = pd.Series(values).interpolate(limit_direction="both").to_numpy()
    excluded = () if max_fill is None else _excluded(values, start, max_fill)
    return Observation(
        filled,
        float(step),
        start,
        spec,
        sim_step=sim_step,
        train_window=train_window,
        retrain_every=retrain_every,
        forecast=forecast,
        excluded=excluded,
        day_offset=day_offset,
    )


def seconds_of_day(timestamp: pd.Timestamp) -> float:
    """Seconds after UTC midnight of ``timestamp`` (naive = UTC)."""
    ts = pd.Timestamp(timestamp)
    ts = ts.tz_convert("UTC") if ts.tzinfo is not None else ts
    return float((ts - ts.normalize()).total_seconds())


def _excluded(values: np.ndarray, start: int, max_fill: int) -> tuple[tuple[int, int], ...]:
    """The evaluated part of each gap of more than ``max_fill`` missing cells."""
    return tuple(
        (max(begin, start), end) for begin, end in long_gaps(values, max_fill) if end > start
    )


def score_forecast(
    values: np.ndarray, forecast: QuantileForecast, start: int, step: int
) -> ForecastScore:
    """MASE of the median and pinball loss and coverage per quantile at the lead horizon."""
    horizon = forecast.horizons[0]
    origins = np.arange(start - 1, len(values) - horizon)
    actual = values[origins + horizon]
    predicted = forecast.values[origins, 0, :]
    keep = ~np.isnan(actual) & ~np.isnan(predicted).any(axis=1)
    actual, predicted = actual[keep], predicted[keep]
    history = values[:start]
    season = max(1, DAY // step)
    median = int(np.argmin(np.abs(np.array(forecast.quantiles) - 0.5)))
    scaled: float | None = None
    missing = {}
    try:
        scaled = mase(actual, predicted[:, median], history[~np.isnan(history)], season)
    except DataValidationError as exc:  # too short or flat a history: no scale, no MASE
        missing["mase"] = str(exc)
    return ForecastScore(
        horizon_seconds=horizon * step,
        mase=scaled,
        pinball={
            q: pinball_loss(actual, predicted[:, i], q) for i, q in enumerate(forecast.quantiles)
        },
        coverage={q: coverage(actual, predicted[:, i]) for i, q in enumerate(forecast.quantiles)},
        missing=missing,
    )


def _seeded_model(
    name: str,
    horizons: tuple[int, ...],
    quantiles: tuple[float, ...],
    seed: int,
    params: Mapping[str, Any],
) -> BaseForecaster:
    model = make_model(name, horizons=horizons, quantiles=quantiles, **params)
    # the baselines draw nothing; an explicit random_state in ``params`` wins
    if "random_state" in model.get_params() and "random_state" not in params:
        model.set_params(random_state=seed)
    return model


def _splitter(settings: BacktestSettings, step: int) -> WalkForward:
    return WalkForward(
        _cells("train_window", settings.train_window, step),
        _cells("retrain_every", settings.retrain_every, step),
    )


def _cells(name: str, seconds: int, step: int) -> int:
    if seconds % step or not seconds:
        raise ConfigError(
            f"`{name}` must be a whole number of the data's {step} s steps, got {seconds} s"
        )
    return seconds // step
