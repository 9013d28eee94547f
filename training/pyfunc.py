"""The model prewarm registers: a fitted forecaster plus the policies of its workloads.

:class:`PrewarmModel` is an ``mlflow.pyfunc.PythonModel``. Its ``predict`` takes a recent
history (long frame ``series, timestamp, value`` plus covariate columns) and returns one row
per workload: the capacity plan of :func:`forecaster.capacity.plan_capacity` (forecast
demand over the lead window and desired replicas) and, per quantile, the largest forecast
over that window. MLflow's schema has no time zones, so the pyfunc's timestamps are naive
UTC (``to_naive_utc``); aware ones are accepted too. Serving calls
:meth:`PrewarmModel.plan` on the unwrapped object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from forecaster.capacity import PLAN_COLUMNS, plan_capacity
from forecaster.duration import parse_duration
from forecaster.features import FeatureConfig
from forecaster.models.base import BaseForecaster
from forecaster.workload import WorkloadPolicy


def history_cells(features: FeatureConfig | None, step: int, horizons: tuple[int, ...]) -> int:
    """Cells of history before an origin that every feature of ``features`` can read.

    A seasonal lag of ``s`` cells reads the target time minus ``s`` (``origin + h - s``) and
    the level one season before the origin, averaged over the first window; the trailing
    scale reads ``scale_window``; a burst in the ``burst_window`` is judged against the
    ``burst_reference`` before it. Models without declared features need one cell.
    """
    if features is None:
        return 2

    def cells(text: str) -> int:
        return max(1, round(parse_duration(text) / step))

    windows = [cells(w) for w in features.windows] or [2]
    level = max(2, windows[0])
    seasons = [cells(s) + level + features.seasonal_smoothing for s in features.seasonal_lags]
    wanted = [
        max(features.lags, default=0) + max(features.covariate_lags, default=0) + 1,
        *windows,
        *seasons,
        cells(features.scale_window),
    ]
    if features.burst_window is not None:
        wanted.append(cells(features.burst_window) + cells(features.burst_reference))
    return int(max(wanted)) + 1


class PrewarmModel(PythonModel):
    """A fitted forecaster and the policies of the workloads it plans for.

    Parameters
    ----------
    forecaster
        A fitted :class:`~forecaster.models.base.BaseForecaster`.
    policies
        Workload name -> :class:`~forecaster.workload.WorkloadPolicy`: what the plan of each
        workload follows (quantile, forecast utilization, lead window, bounds), registered
        with the model so that serving plans with exactly these.
    """

    def __init__(self, forecaster: BaseForecaster, policies: Mapping[str, WorkloadPolicy]) -> None:
        self.forecaster = forecaster
        self.policies = dict(policies)

    # -- what serving reads -------------------------------------------------------------------
    @property
    def workloads(self) -> tuple[str, ...]:
        """Names of the workloads the model plans for, sorted."""
        return tuple(sorted(self.policies))

    @property
    def step(self) -> int:
        """Grid step of the history the model expects, in seconds."""
        return int(self.forecaster.step_)

    @property
    def covariates(self) -> tuple[str, ...]:
        """Covariate columns the history must carry."""
        return tuple(self.forecaster.covariates_)

    @property
    def history_cells_needed(self) -> int:
        """Cells of recent history per workload that feed every feature of the model."""
        features = getattr(self.forecaster, "features_", None)
        return history_cells(features, self.step, tuple(self.forecaster.horizons))

    def plan(self, history: pd.DataFrame) -> pd.DataFrame:
        """Desired replicas now for every workload of ``history``, each by its policy.

        Returns
        -------
        pandas.DataFrame
            :data:`forecaster.capacity.PLAN_COLUMNS`, one row per workload, sorted by name.
        """
        if history.empty:
            return pd.DataFrame(columns=list(PLAN_COLUMNS))
        return plan_capacity(self.forecaster, history, self.policies)

    def served_by(self, workload: str) -> str | None:
        """Which registered models forecast ``workload`` when the forecaster combines or
        selects them per workload (e.g. ``"mstl"`` or ``"lightgbm 0.70 + ewma 0.30"``), else
        None: the forecaster is the one model."""
        describe = getattr(self.forecaster, "served_by", None)
        return None if describe is None else str(describe(workload))

    def forecast(self, history: pd.DataFrame) -> pd.DataFrame:
        """The forecaster's long quantile forecast from the last cell of each series."""
        return self.forecaster.predict(history)

    # -- pyfunc -------------------------------------------------------------------------------
    def predict(
        self,
        context: Any,
        model_input: pd.DataFrame,
        params: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Plan plus lead-window quantiles, one row per workload (see the module docs)."""
        out = self.plan(_as_history(model_input))
        # MLflow's schema type ``datetime`` is time-zone naive: the pyfunc speaks naive UTC.
        out["origin"] = pd.to_datetime(out["origin"], utc=True).dt.tz_localize(None)
        out["desired_replicas"] = out["desired_replicas"].astype(np.int64)
        return out


def to_naive_utc(history: pd.DataFrame) -> pd.DataFrame:
    """``history`` with naive UTC timestamps: the form MLflow's signature accepts."""
    out = history.copy()
    out["timestamp"] = pd.to_datetime(out["timestamp"], utc=True).dt.tz_localize(None)
    return out


def _as_history(frame: pd.DataFrame) -> pd.DataFrame:
    """MLflow may hand timestamps back naive (its schema has no time zone): make them UTC."""
    frame = frame.copy()
    stamps = pd.to_datetime(frame["timestamp"])
    if stamps.dt.tz is None:
        stamps = stamps.dt.tz_localize("UTC")
    frame["timestamp"] = stamps.dt.tz_convert("UTC")
    frame["series"] = frame["series"].astype(str)
    return frame
