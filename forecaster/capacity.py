"""From quantile forecasts to desired replicas (DESIGN section 5).

``desired(t) = clamp(ceil(max_{h in [L, L+hold]} Q_tau(t+h) / (c * u)), min, max)`` where ``L``
is the lead time (cold start plus decision delay), ``c`` the capacity of one replica, ``u`` the
target utilization and ``tau`` the workload's quantile, both the forecast path's settings of
the workload's :class:`~forecaster.workload.WorkloadPolicy`. A model with a window target forecasts
the ``tau``-quantile of the window's maximum directly, and the plan sizes for it instead of the
maximum of per-horizon quantiles where the window is the workload's
(:func:`~forecaster.models.base.lead_window_forecast`). The live service and the pyfunc
model plan with :func:`plan_capacity`; the backtester's predictive policies use the same
:func:`desired_replicas`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from forecaster.buffer import buffer_rate
from forecaster.exceptions import ConfigError, DataValidationError, PlanError
from forecaster.models.base import BaseForecaster, lead_window_forecast, quantile_column
from forecaster.workload import WorkloadPolicy, WorkloadSpec

PLAN_COLUMNS = (
    "series",
    "origin",
    "forecast_demand",
    "desired_replicas",
    "quantile",
    "lead_time_seconds",
)


def desired_replicas(
    rate: np.ndarray | float,
    *,
    capacity_per_replica: np.ndarray | float,
    target_utilization: np.ndarray | float,
    min_replicas: np.ndarray | int,
    max_replicas: np.ndarray | int,
) -> np.ndarray:
    """``clamp(ceil(rate / (c * u)), min, max)`` as integers.

    The tiny slack keeps a rate that is an exact multiple of ``c * u`` from rounding up one
    replica because of floating-point noise.

    >>> desired_replicas(np.array([0.0, 10.0, 10.5]), capacity_per_replica=5.0,
    ...                  target_utilization=1.0, min_replicas=1, max_replicas=3).tolist()
    [1, 2, 3]
    """
    needed = np.ceil(
        np.asarray(rate, dtype=float) / (capacity_per_replica * target_utilization) - 1e-9
    )
    return np.clip(needed, min_replicas, max_replicas).astype(int)


def lead_seconds(spec: WorkloadSpec, decision_delay_seconds: float = 0.0) -> float:
    """Lead time ``L``: the cold start a plan must cover plus the decision delay."""
    return WorkloadPolicy(spec, decision_delay=decision_delay_seconds).lead_seconds


def required_horizons(
    spec: WorkloadSpec, step: int, hold_seconds: float = 0.0, decision_delay_seconds: float = 0.0
) -> tuple[int, ...]:
    """Horizons (cells) covering ``[t + L, t + L + hold]``, counted as the backtest counts them
    (see :func:`forecaster.workload.horizon_range`), so live plans match simulated ones."""
    return WorkloadPolicy(spec, hold=hold_seconds, decision_delay=decision_delay_seconds).horizons(
        step
    )


def check_plan_row(
    workload: str,
    forecast_demand: float,
    desired_replicas: float,
    lead_time_seconds: float,
    bounds: tuple[int, int] | None = None,
) -> None:
    """Refuse one workload's plan whose numbers no workload can run on.

    Parameters
    ----------
    workload : str
        Named in the error.
    forecast_demand, desired_replicas, lead_time_seconds : float
        The plan's numbers (see :data:`PLAN_COLUMNS`); each must be finite and ``>= 0``.
    bounds : (int, int) or None, default None
        ``(min_replicas, max_replicas)`` that ``desired_replicas`` must lie in, when given.

    Raises
    ------
    PlanError
        Naming the workload, the column and the value.

    Examples
    --------
    >>> check_plan_row("chat", 12.5, 3, 300.0, bounds=(1, 10))
    """
    values = {
        "forecast_demand": forecast_demand,
        "desired_replicas": desired_replicas,
        "lead_time_seconds": lead_time_seconds,
    }
    for column, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise PlanError(
                f"plan gives workload {workload!r} `{column}` = {value!r}; "
                "values must be finite and >= 0"
            )
    if bounds is not None and not bounds[0] <= desired_replicas <= bounds[1]:
        raise PlanError(
            f"plan gives workload {workload!r} `desired_replicas` = {desired_replicas!r}, "
            f"outside [{bounds[0]}, {bounds[1]}]"
        )


def check_plan(
    plan: pd.DataFrame,
    expected: Sequence[str],
    policies: Mapping[str, WorkloadPolicy] | None = None,
) -> None:
    """Refuse a plan that lacks columns or workloads, or holds a value no workload can run on.

    The one check of a plan, wherever one comes from (the registry's loader, serving's
    candidate model): :data:`PLAN_COLUMNS` present, one row per workload of ``expected`` and
    no other, and every row through :func:`check_plan_row`.

    Parameters
    ----------
    plan : DataFrame
        Output of :func:`plan_capacity` (or of a model's ``plan``).
    expected : sequence of str
        Workloads the plan must cover, exactly.
    policies : mapping of str to WorkloadPolicy or None, default None
        When given, each workload's desired replicas must lie within its policy's bounds.

    Raises
    ------
    PlanError
        Naming the missing column or workload, or the bad value.
    """
    missing = [c for c in PLAN_COLUMNS if c not in plan.columns]
    if missing:
        raise PlanError(f"plan lacks column(s) {missing}; got {list(plan.columns)}")
    planned = plan["series"].astype(str)
    absent = sorted(set(expected) - set(planned))
    extra = sorted(set(planned) - set(expected))
    if absent or extra or len(planned) != len(set(planned)):
        raise PlanError(
            f"plan covers {sorted(planned)[:10]}, expected one row for each of "
            f"{sorted(expected)[:10]}: missing {absent[:10]}, unexpected {extra[:10]}"
        )
    # Anything that is not a number reads as NaN, and NaN is refused with the workload's name.
    columns = ("forecast_demand", "desired_replicas", "lead_time_seconds")
    numbers = [pd.to_numeric(plan[c], errors="coerce").to_numpy(dtype=float) for c in columns]
    for name, demand, replicas, lead in zip(planned, *numbers, strict=True):
        spec = policies[name].spec if policies is not None else None
        bounds = None if spec is None else (spec.min_replicas, spec.max_replicas)
        check_plan_row(name, float(demand), float(replicas), float(lead), bounds=bounds)


def plan_capacity(
    model: BaseForecaster,
    history: pd.DataFrame,
    workloads: Mapping[str, WorkloadPolicy] | Mapping[str, WorkloadSpec],
    *,
    hold_seconds: float = 0.0,
    decision_delay_seconds: float = 0.0,
) -> pd.DataFrame:
    """Forecast demand over each workload's lead window and the replicas it needs, now.

    Each workload plans at its policy's forecast quantile (``tau``) and forecast utilization
    (``forecast_u``), over its own ``[L, L + hold]``.

    Parameters
    ----------
    model
        A fitted forecaster whose horizons cover every workload's lead window and whose
        quantiles include every workload's ``tau``.
    history
        Recent long frame of the workloads (the forecast origin is each series' last cell).
    workloads
        Workload name -> :class:`~forecaster.workload.WorkloadPolicy`, or -> capacity spec
        (planned as a policy with default settings and ``hold_seconds`` and
        ``decision_delay_seconds``); workloads of ``history`` without one are refused.
    hold_seconds, decision_delay_seconds
        Extra time a replica is kept for, and the delay between a decision and the ask, of
        workloads given by a bare spec (a policy carries its own).

    Returns
    -------
    pandas.DataFrame
        One row per workload with :data:`PLAN_COLUMNS`, then ``peak_horizon_seconds`` (the
        earliest horizon at which the planned quantile reaches its maximum; NaN where the
        window target's forecast, of the window's maximum and so of no one horizon, is planned),
        ``buffer_demand`` (the warm buffer's ask, NaN without one; ``forecast_demand`` is
        the larger of it and the forecast) and one column per model quantile (``q0.5``...):
        its largest forecast over the same lead window (the window target's forecast where
        the model has one for that window).
    """
    policies = {
        name: item
        if isinstance(item, WorkloadPolicy)
        else WorkloadPolicy(item, hold=hold_seconds, decision_delay=decision_delay_seconds)
        for name, item in workloads.items()
    }
    forecast = model.predict(history)
    id_col = model.columns_.id_col
    unknown = sorted(set(forecast[id_col]) - set(policies))
    if unknown:
        raise ConfigError(f"no capacity spec for workload(s) {unknown}; known: {sorted(policies)}")
    if forecast.empty:
        return pd.DataFrame([], columns=list(PLAN_COLUMNS))
    # One pass over every row at once: series codes in sorted-name order (as a sorted groupby
    # would visit them), then per-series parameters as arrays indexed by code.
    codes, uniques = pd.factorize(forecast[id_col], sort=True)
    names = [str(name) for name in uniques]
    quantile_columns = [quantile_column(q) for q in model.quantiles]
    present = [c for c in quantile_columns if c in forecast.columns]
    n = len(names)
    column_of = np.zeros(n, dtype=np.int64)
    missing_column = np.zeros(n, dtype=bool)
    first_h = np.empty(n, dtype=np.int64)
    last_h = np.empty(n, dtype=np.int64)
    tau, lead = np.empty(n), np.empty(n)
    capacity, utilization = np.empty(n), np.empty(n)
    low, high = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    step = model.step_
    # Workloads usually share a handful of lead windows: compute each one's horizons once.
    horizons_of: dict[tuple[float, float], tuple[int, int]] = {}
    for i, name in enumerate(names):
        policy = policies[name]
        spec = policy.spec
        column = quantile_column(policy.tau)
        if column in present:
            column_of[i] = present.index(column)
        else:
            missing_column[i] = True
        key = (policy.lead_seconds, policy.hold)
        if key not in horizons_of:
            horizons_of[key] = policy.horizon_range(step)
        first_h[i], last_h[i] = horizons_of[key]
        tau[i] = policy.tau
        lead[i] = policy.lead_seconds
        capacity[i] = spec.capacity_per_replica
        utilization[i] = policy.forecast_u
        low[i], high[i] = spec.min_replicas, spec.max_replicas

    horizon = forecast["horizon"].to_numpy(dtype=np.int64)
    inside = (horizon >= first_h[codes]) & (horizon <= last_h[codes])
    # Distinct horizons of the lead window each series has (duplicates counted once).
    span = int(last_h.max()) + 1
    pairs = np.unique(codes[inside].astype(np.int64) * span + horizon[inside])
    covered = np.bincount(pairs // span, minlength=n)
    incomplete = covered != (last_h - first_h + 1)

    # The largest forecast of the series' own quantile over its window; NaN cells are skipped
    # as pandas' max skips them, and an all-NaN window stays NaN (refused below).
    demand = np.full(n, np.nan)
    window_max = np.full((n, len(present)), np.nan)
    peak = np.full(n, np.iinfo(np.int64).max)
    peak_seconds = np.full(n, np.nan)
    if present:
        values = forecast[present].to_numpy(dtype=float)
        rows = np.flatnonzero(inside)
        picked = values[rows, column_of[codes[rows]]]
        np.fmax.at(demand, codes[rows], picked)
        # Every quantile's maximum over the same window, and the earliest horizon that set
        # the planned one: what an explanation of the answer shows.
        np.fmax.at(window_max, codes[rows], values[rows])
        at_max = picked == demand[codes[rows]]
        np.minimum.at(peak, codes[rows][at_max], horizon[rows][at_max])
        peak_seconds = (peak * step).astype(float)
        spanned = model.predict_window(history)
        if spanned is not None:  # the window target replaces the maxima where it fits
            window = spanned.set_index(id_col).reindex(names)[present].to_numpy(dtype=float)
            spanned_h = model.window_span
            demand = lead_window_forecast(
                demand, window[np.arange(n), column_of], spanned_h, first_h, last_h
            )
            window_max = lead_window_forecast(window_max, window, spanned_h, first_h, last_h)
            # Its forecast is of the window's maximum, of no one horizon: no peak horizon.
            no_peak = np.full(n, np.nan)
            peak_seconds = lead_window_forecast(peak_seconds, no_peak, spanned_h, first_h, last_h)
    not_finite = ~np.isfinite(demand)

    # Refuse with the message of the first failing workload in name order, checked in the
    # order a per-workload pass would check them.
    failing = np.flatnonzero(missing_column | incomplete | not_finite)
    if len(failing):
        i = int(failing[0])
        name = names[i]
        if missing_column[i]:
            raise ConfigError(
                f"workload {name!r} plans at quantile {policies[name].tau:g} but the model "
                f"forecasts {list(model.quantiles)}"
            )
        if incomplete[i]:
            needed = list(range(int(first_h[i]), int(last_h[i]) + 1))
            raise ConfigError(
                f"workload {name!r} needs horizons {needed} (cells of {model.step_}s), "
                f"the model forecasts {list(model.horizons)}"
            )
        raise DataValidationError(
            f"forecast for workload {name!r} is not finite: {float(demand[i])!r}"
        )

    _, first_row = np.unique(codes, return_index=True)  # the first row of every series
    origin = forecast["origin"].iloc[first_row].reset_index(drop=True)
    buffered = _buffer_demand(names, policies, history, model, origin)
    demand = np.fmax(demand, buffered)  # NaN (no buffer) leaves the forecast
    replicas = desired_replicas(
        demand,
        capacity_per_replica=capacity,
        target_utilization=utilization,
        min_replicas=low,
        max_replicas=high,
    )
    return pd.DataFrame(
        {
            "series": np.asarray(names, dtype=object),
            "origin": origin,
            "forecast_demand": demand,
            "desired_replicas": replicas.astype(np.int64),
            "quantile": tau,
            "lead_time_seconds": lead,
            "peak_horizon_seconds": peak_seconds,
            "buffer_demand": buffered,
            **{column: window_max[:, j] for j, column in enumerate(present)},
        },
        columns=[*PLAN_COLUMNS, "peak_horizon_seconds", "buffer_demand", *present],
    )


def _buffer_demand(
    names: Sequence[str],
    policies: Mapping[str, WorkloadPolicy],
    history: pd.DataFrame,
    model: BaseForecaster,
    origin: pd.Series,
) -> np.ndarray:
    """Per workload, the warm buffer's ask (NaN without one): the latest observed demand
    plus its origin hour's learned buffer (:mod:`forecaster.buffer`); the plan asks for the
    larger of it and the forecast, as the backtest's hybrid does."""
    out = np.full(len(names), np.nan)
    rows = [i for i, name in enumerate(names) if policies[name].buffer_quantile > 0]
    if not rows:
        return out
    unlearned = [names[i] for i in rows if not policies[names[i]].buffer]
    if unlearned:
        raise PlanError(
            f"workload {unlearned[0]!r} plans with a warm buffer (`buffer_quantile` > 0) but "
            "its policy holds no learned `buffer`: train it (prewarm train learns it)"
        )
    columns = model.columns_
    observed = history.dropna(subset=[columns.target_col]).sort_values(columns.time_col)
    latest = observed.groupby(columns.id_col)[columns.target_col].last()
    wanted = [names[i] for i in rows]
    now = latest.reindex(wanted).to_numpy(dtype=float)
    if not np.isfinite(now).all():
        missing = wanted[int(np.flatnonzero(~np.isfinite(now))[0])]
        raise DataValidationError(f"no observed demand for workload {missing!r}'s warm buffer")
    stamps = pd.DatetimeIndex(origin.iloc[rows])
    hours = (stamps.tz_convert("UTC") if stamps.tz is not None else stamps).hour.to_numpy()
    ratios = np.array([policies[name].buffer[h] for name, h in zip(wanted, hours, strict=True)])
    levels = np.array([policies[name].buffer_level for name in wanted])
    out[rows] = buffer_rate(now, ratios, levels)
    return out
