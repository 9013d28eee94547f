"""Capacity planning: the vectorized ``plan_capacity`` against a plain per-workload reference."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from forecaster.capacity import (
    PLAN_COLUMNS,
    desired_replicas,
    lead_seconds,
    plan_capacity,
    required_horizons,
)
from forecaster.exceptions import ConfigError, DataValidationError
from forecaster.models.base import quantile_column
from forecaster.models.baseline import LastValue
from forecaster.workload import WorkloadPolicy, WorkloadSpec

STEP = 60


def reference_plan(
    model: Any,
    history: pd.DataFrame,
    specs: Mapping[str, WorkloadSpec],
    *,
    hold_seconds: float = 0.0,
    decision_delay_seconds: float = 0.0,
) -> pd.DataFrame:
    """The definition, one workload at a time: what the vectorized version must reproduce."""
    forecast = model.predict(history)
    id_col = model.columns_.id_col
    unknown = sorted(set(forecast[id_col]) - set(specs))
    if unknown:
        raise ConfigError(f"no capacity spec for workload(s) {unknown}; known: {sorted(specs)}")
    rows = []
    present = [quantile_column(q) for q in model.quantiles if quantile_column(q) in forecast]
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
                float(window.loc[window[column] == demand, "horizon"].min() * model.step_),
                math.nan,  # a bare spec has no warm buffer
                *(float(window[c].max()) for c in present),
            )
        )
    columns = [*PLAN_COLUMNS, "peak_horizon_seconds", "buffer_demand", *present]
    return pd.DataFrame(rows, columns=columns)


@dataclass
class CannedForecaster:
    """Returns a fixed long forecast, so odd cells (NaN, gaps, inf) can be planted."""

    forecast: pd.DataFrame
    horizons: tuple[int, ...]
    quantiles: tuple[float, ...]
    step_: int = STEP
    window: pd.DataFrame | None = None  # a window target's forecast over the horizons' span

    @property
    def columns_(self) -> Any:
        return SimpleNamespace(id_col="series")

    @property
    def window_span(self) -> tuple[int, int] | None:
        return None if self.window is None else (min(self.horizons), max(self.horizons))

    def predict(self, history: pd.DataFrame) -> pd.DataFrame:
        return self.forecast.copy()

    def predict_window(self, history: pd.DataFrame) -> pd.DataFrame | None:
        return None if self.window is None else self.window.copy()


def canned(
    names: list[str], horizons: tuple[int, ...], quantiles: tuple[float, ...], seed: int = 0
) -> CannedForecaster:
    rng = np.random.default_rng(seed)
    origin = pd.Timestamp("2026-05-01T12:00:00Z")
    rows = []
    for name in names:
        level = 100 * rng.random()
        for h in horizons:
            values = np.sort(level + 10 * rng.random(len(quantiles)))
            row = {
                "series": name,
                "origin": origin,
                "target_time": origin + pd.Timedelta(seconds=h * STEP),
                "horizon": h,
            }
            row.update({quantile_column(q): v for q, v in zip(quantiles, values, strict=True)})
            rows.append(row)
    return CannedForecaster(pd.DataFrame(rows), horizons, quantiles)


def spec(**overrides: Any) -> WorkloadSpec:
    base: dict[str, Any] = {
        "capacity_per_replica": 10.0,
        "cold_start": 240.0,
        "target_utilization": 0.8,
        "min_replicas": 1,
        "max_replicas": 50,
        "quantile": 0.9,
    }
    base.update(overrides)
    return WorkloadSpec(**base)


MIXED = {
    # Names out of order on purpose: the plan is sorted by name.
    "zeta": spec(),
    "alpha": spec(quantile=0.5, cold_start=120.0, capacity_per_replica=3.0),
    "mid": spec(min_replicas=4, max_replicas=6, target_utilization=1.0),
    "tiny": spec(max_replicas=2, capacity_per_replica=0.5),
}


def test_real_model_matches_the_per_workload_definition() -> None:
    end = pd.Timestamp("2026-05-01T12:00:00Z")
    times = pd.date_range(end=end, periods=120, freq=f"{STEP}s")
    rng = np.random.default_rng(3)
    frame = pd.concat(
        [
            pd.DataFrame(
                {"series": name, "timestamp": times, "value": 5 + 50 * rng.random(len(times))}
            )
            for name in MIXED
        ],
        ignore_index=True,
    )
    settings = ((0.0, 0.0), (120.0, 60.0))
    horizons = sorted(
        {h for s in MIXED.values() for hd in settings for h in required_horizons(s, STEP, *hd)}
    )
    model = LastValue(horizons=horizons, quantiles=[0.5, 0.9], scale_window="30m")
    model.fit(frame)
    for hold, delay in settings:
        got = plan_capacity(model, frame, MIXED, hold_seconds=hold, decision_delay_seconds=delay)
        want = reference_plan(model, frame, MIXED, hold_seconds=hold, decision_delay_seconds=delay)
        pd.testing.assert_frame_equal(got, want)
        assert list(got["series"]) == sorted(MIXED)
        assert got["desired_replicas"].dtype == np.int64


def test_canned_forecast_with_nan_cells_and_clamps() -> None:
    model = canned(sorted(MIXED), tuple(range(1, 12)), (0.5, 0.9))
    frame = model.forecast
    # A NaN cell inside one window (zeta's is horizons 5-8 with a 180 s hold) is skipped, as
    # the per-workload max skips it.
    frame.loc[(frame["series"] == "zeta") & (frame["horizon"] == 5), "q0.9"] = np.nan
    got = plan_capacity(model, pd.DataFrame(), MIXED, hold_seconds=180.0)
    want = reference_plan(model, pd.DataFrame(), MIXED, hold_seconds=180.0)
    pd.testing.assert_frame_equal(got, want)
    by_name = got.set_index("series")
    assert by_name.loc["mid", "desired_replicas"] in (4, 5, 6)
    assert by_name.loc["tiny", "desired_replicas"] == 2


def test_many_workloads_sharing_specs() -> None:
    names = [f"w{i:04d}" for i in range(300)]
    shared = [spec(), spec(quantile=0.5, cold_start=60.0), spec(capacity_per_replica=1.0)]
    specs = {name: shared[i % 3] for i, name in enumerate(names)}
    model = canned(names[::-1], tuple(range(1, 8)), (0.5, 0.9), seed=7)
    got = plan_capacity(model, pd.DataFrame(), specs, hold_seconds=60.0)
    want = reference_plan(model, pd.DataFrame(), specs, hold_seconds=60.0)
    pd.testing.assert_frame_equal(got, want)


def _same_error(model: Any, specs: Mapping[str, WorkloadSpec], error: type[Exception]) -> str:
    with pytest.raises(error) as expected:
        reference_plan(model, pd.DataFrame(), specs)
    with pytest.raises(error) as caught:
        plan_capacity(model, pd.DataFrame(), specs)
    assert str(caught.value) == str(expected.value)
    return str(caught.value)


def test_refusals_match_the_definition() -> None:
    names = sorted(MIXED)
    # A quantile the model does not forecast.
    model = canned(names, tuple(range(1, 12)), (0.5, 0.9))
    bad_tau = {**MIXED, "mid": spec(quantile=0.75)}
    assert "quantile 0.75" in _same_error(model, bad_tau, ConfigError)
    # Horizons that do not cover a lead window.
    short = canned(names, (1, 2, 3), (0.5, 0.9))
    assert "needs horizons" in _same_error(short, MIXED, ConfigError)
    # A window with a gap in its horizons.
    gappy = canned(names, tuple(range(1, 12)), (0.5, 0.9))
    gappy.forecast = gappy.forecast[
        ~((gappy.forecast["series"] == "tiny") & (gappy.forecast["horizon"] == 5))
    ]
    assert "'tiny' needs horizons" in _same_error(gappy, MIXED, ConfigError)
    # An all-NaN window and an infinite one.
    for planted in (np.nan, np.inf):
        broken = canned(names, tuple(range(1, 12)), (0.5, 0.9))
        broken.forecast.loc[broken.forecast["series"] == "mid", "q0.9"] = planted
        assert "'mid' is not finite" in _same_error(broken, MIXED, DataValidationError)
    # No spec for a workload.
    assert "no capacity spec" in _same_error(model, {"alpha": MIXED["alpha"]}, ConfigError)


def test_first_failing_workload_in_name_order_is_named() -> None:
    names = sorted(MIXED)
    model = canned(names, tuple(range(1, 12)), (0.5, 0.9))
    model.forecast.loc[model.forecast["series"] == "zeta", "q0.5"] = np.nan
    # "alpha" (first by name) plans at 0.75: its quantile error comes before zeta's NaN.
    specs = {**MIXED, "alpha": spec(quantile=0.75), "zeta": spec(quantile=0.5)}
    assert "'alpha'" in _same_error(model, specs, ConfigError)


def test_empty_forecast_gives_an_empty_plan() -> None:
    model = canned([], (1, 2), (0.5, 0.9))
    model.forecast = pd.DataFrame(columns=["series", "origin", "target_time", "horizon", "q0.9"])
    got = plan_capacity(model, pd.DataFrame(), MIXED)
    assert list(got.columns) == list(PLAN_COLUMNS) and got.empty


def test_a_window_forecast_replaces_the_largest_quantile_where_it_covers_the_window() -> None:
    policies = {
        "match": WorkloadPolicy(spec(cold_start=120.0), hold=300.0),  # horizons 3..8
        "other": WorkloadPolicy(spec(), hold=180.0),  # horizons 5..8
    }
    model = canned(sorted(policies), tuple(range(3, 9)), (0.5, 0.9))
    without = plan_capacity(model, pd.DataFrame(), policies).set_index("series")
    first_rows = model.forecast.groupby("series", as_index=False).first()
    # A window forecast below every per-horizon one: the plan takes it, not the larger.
    model.window = first_rows[["series", "origin"]].assign(**{"q0.5": 0.5, "q0.9": 1.0})
    planned = plan_capacity(model, pd.DataFrame(), policies).set_index("series")
    assert planned.loc["match", "forecast_demand"] == 1.0
    assert planned.loc["match", "q0.5"] == 0.5 and planned.loc["match", "q0.9"] == 1.0
    assert planned.loc["match", "desired_replicas"] == 1
    assert without.loc["match", "forecast_demand"] > 1.0
    # The window's maximum is of no one horizon: no peak horizon where it is planned.
    assert np.isnan(planned.loc["match", "peak_horizon_seconds"])
    assert np.isfinite(without.loc["match", "peak_horizon_seconds"])
    pd.testing.assert_series_equal(planned.loc["other"], without.loc["other"])
