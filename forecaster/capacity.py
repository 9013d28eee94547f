"""From quantile forecasts to desired replicas (DESIGN section 5).

``desired(t) = clamp(ceil(max_{h in [L, L+hold]} Q_tau(t+h) / (c * u)), min, max)`` where ``L``
is the lead time (cold start plus decision delay), ``c`` the capacity of one replica, ``u`` the
target utilization and ``tau`` the workload's quantile. The live service and the pyfunc model
plan with :func:`plan_capacity`; the backtester's predictive policies use the same
:func:`desired_replicas`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from forecaster.backtest.workload import WorkloadSpec
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.models.base import BaseForecaster, quantile_column
from forecaster.policies.base import horizon_range

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
    capacity_per_replica: float,
    target_utilization: float,
    min_replicas: int,
    max_replicas: int,
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
    return spec.cold_start_model.planning_seconds + decision_delay_seconds


def required_horizons(
    spec: WorkloadSpec, step: int, hold_seconds: float = 0.0, decision_delay_seconds: float = 0.0
) -> tuple[int, ...]:
    """Horizons (cells) covering ``[t + L, t + L + hold]``, counted as the backtest counts them
    (see :func:`forecaster.policies.base.horizon_range`), so live plans match simulated ones."""
    first, last = horizon_range(lead_seconds(spec, decision_delay_seconds), hold_seconds, step)
    return tuple(range(first, last + 1))


def plan_capacity(
    model: BaseForecaster,
    history: pd.DataFrame,
    specs: Mapping[str, WorkloadSpec],
    *,
    hold_seconds: float = 0.0,
    decision_delay_seconds: float = 0.0,
) -> pd.DataFrame:
    """Forecast demand over each workload's lead window and the replicas it needs, now.

    Parameters
    ----------
    model
        A fitted forecaster whose horizons cover every workload's lead window and whose
        quantiles include every workload's ``tau``.
    history
        Recent long frame of the workloads (the forecast origin is each series' last cell).
    specs
        Workload name -> capacity spec; workloads of ``history`` without a spec are refused.
    hold_seconds, decision_delay_seconds
        Extra time a replica is kept for, and the delay between a decision and the ask.

    Returns
    -------
    pandas.DataFrame
        One row per workload with :data:`PLAN_COLUMNS`.
    """
    forecast = model.predict(history)
    id_col = model.columns_.id_col
    unknown = sorted(set(forecast[id_col]) - set(specs))
    if unknown:
        raise ConfigError(f"no capacity spec for workload(s) {unknown}; known: {sorted(specs)}")
    rows = []
    for name, part in forecast.groupby(id_col, sort=True):
        spec = specs[str(name)]
        column = quantile_column(spec.tau)
        if column not in part:
            raise ConfigError(
                f"workload {name!r} plans at quantile {spec.tau:g} but the model forecasts "
                f"{list(model.quantiles)}"
            )
        horizons = required_horizons(spec, model.step_, hold_seconds, decision_delay_seconds)
        window = part[part["horizon"].isin(horizons)]
        if set(window["horizon"]) != set(horizons):
            raise ConfigError(
                f"workload {name!r} needs horizons {list(horizons)} (cells of {model.step_}s), "
                f"the model forecasts {list(model.horizons)}"
            )
        demand = float(window[column].max())
        if not math.isfinite(demand):
            raise DataValidationError(f"forecast for workload {name!r} is not finite: {demand!r}")
        replicas = desired_replicas(
            demand,
            capacity_per_replica=spec.capacity_per_replica,
            target_utilization=spec.target_utilization,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
        )
        rows.append(
            (
                str(name),
                part["origin"].iloc[0],
                demand,
                int(replicas),
                spec.tau,
                lead_seconds(spec, decision_delay_seconds),
            )
        )
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
