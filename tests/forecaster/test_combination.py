"""The combination model: weights learned out of sample, and the model they should pick."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError, NotEnoughHistoryError
from forecaster.metrics import pinball_loss
from forecaster.models import make_model
from forecaster.models.combination import (
    MIN_VALIDATION_CELLS,
    Combination,
    coverage_slack,
    pinball_weights,
    select_candidate,
)

STEP = 900
HORIZONS = (1, 4)
QUANTILES = (0.5, 0.9)
CANDIDATES = ("last-value", "ewma", "seasonal-naive-daily")


def daily(days: int, seed: int, series: str, noise: float = 0.0) -> pd.DataFrame:
    """A daily pattern (plus seeded noise): same time yesterday is exact without noise."""
    cells = days * 86400 // STEP
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    phase = 2 * np.pi * np.arange(cells) * STEP / 86400
    rng = np.random.default_rng(seed)
    value = 50 + 30 * np.sin(phase) + 10 * np.sin(3 * phase) + noise * rng.normal(size=cells)
    return pd.DataFrame({"series": series, "timestamp": times, "value": np.clip(value, 0, None)})


def combination(**params: object) -> Combination:
    model = make_model(
        "combination", horizons=HORIZONS, quantiles=QUANTILES, candidates=CANDIDATES, **params
    )
    assert isinstance(model, Combination)
    return model


def test_weights_recover_the_exact_model() -> None:
    frame = daily(days=5, seed=0, series="exact")
    model = combination().fit(frame)
    weights = model.weights_["exact"]
    best = CANDIDATES.index("seasonal-naive-daily")
    # Same time yesterday forecasts this series exactly: every quantile puts its weight there.
    assert weights.shape == (len(CANDIDATES), len(QUANTILES))
    np.testing.assert_allclose(weights.sum(axis=0), 1.0)
    assert (weights[best] > 0.99).all(), weights
    assert model.served_by("exact") == "seasonal-naive-daily"
    assert sorted(model.models_) == ["seasonal-naive-daily"]  # the unused are not kept


def test_selection_picks_the_exact_model_and_a_level_series_its_own() -> None:
    level = daily(days=5, seed=1, series="level", noise=0.0)
    level["value"] = 20.0 + np.repeat(np.arange(len(level) // 8), 8)[: len(level)] * 0.05
    frame = pd.concat([daily(days=5, seed=0, series="exact"), level], ignore_index=True)
    model = make_model(
        "auto", horizons=HORIZONS, quantiles=QUANTILES, candidates=CANDIDATES, taus={"exact": 0.9}
    ).fit(frame)
    assert model.served_by("exact") == "seasonal-naive-daily"
    # A slow ramp in steps: the last value is nearly exact, yesterday's is a day behind.
    assert model.served_by("level") == "last-value"
    for weights in model.weights_.values():
        assert sorted(np.unique(weights)) == [0.0, 1.0]


def bursty(days: int, seed: int, series: str) -> pd.DataFrame:
    """Seeded noise around a level with spikes on 8% of the cells: no pattern to learn."""
    cells = days * 86400 // STEP
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    rng = np.random.default_rng(seed)
    value = 20 + rng.gamma(1.0, 3.0, cells)
    spikes = rng.random(cells) < 0.08
    value[spikes] += rng.uniform(20, 40, spikes.sum())
    return pd.DataFrame({"series": series, "timestamp": times, "value": value})


def test_selection_judges_the_window_the_plan_sizes_for() -> None:
    frame = bursty(days=6, seed=0, series="b")
    candidates, window = ("ewma", "last-value"), {"last-value": {"target": "window"}}
    model = make_model(
        "auto",
        horizons=HORIZONS,
        quantiles=QUANTILES,
        candidates=candidates,
        candidate_params=window,
        taus={"b": 0.9},
    ).fit(frame)
    # Per horizon, the smoothed level forecasts this noise better than the last value...
    cut = frame["timestamp"].max() - pd.Timedelta("1d") + pd.Timedelta(seconds=STEP)
    origins = pd.date_range(cut, frame["timestamp"].max(), freq=f"{STEP}s")[:-1]
    observed = frame.set_index("timestamp")["value"]

    def per_horizon_loss(name: str) -> float:
        fitted = make_model(name, horizons=HORIZONS, quantiles=QUANTILES, **window.get(name, {}))
        forecast = fitted.fit(frame[frame["timestamp"] < cut]).predict(frame, origins)
        actual = observed.reindex(forecast["target_time"]).to_numpy()
        known = np.isfinite(actual)
        return pinball_loss(actual[known], forecast["q0.9"].to_numpy()[known], 0.9)

    assert per_horizon_loss("ewma") < per_horizon_loss("last-value")
    # ...but the plan sizes for the window's largest value, which the window target forecasts.
    assert model.served_by("b") == "last-value"
    assert model.window_span == (min(HORIZONS), max(HORIZONS))
    own = make_model("last-value", horizons=HORIZONS, quantiles=QUANTILES, target="window")
    pd.testing.assert_frame_equal(model.predict_window(frame), own.fit(frame).predict_window(frame))


def test_a_series_served_per_horizon_gets_the_largest_quantile_as_its_window() -> None:
    frame = pd.concat([daily(5, 0, "exact"), bursty(5, 0, "b")], ignore_index=True)
    model = make_model(
        "auto",
        horizons=HORIZONS,
        quantiles=QUANTILES,
        candidates=("last-value", "seasonal-naive-daily"),
        candidate_params={"last-value": {"target": "window"}},
    )
    # The candidates set it, whichever a fit picks: every retrain of a backtest has a window.
    assert model.window_span == (min(HORIZONS), max(HORIZONS))
    model.fit(frame[frame["series"] == "exact"])
    assert sorted(model.models_) == ["seasonal-naive-daily"]
    assert model.window_span == (min(HORIZONS), max(HORIZONS))
    model.fit(frame)
    assert model.served_by("exact") == "seasonal-naive-daily"
    origins = pd.DatetimeIndex(frame["timestamp"].drop_duplicates().iloc[-8:])
    windows = model.predict_window(frame, origins)
    assert windows is not None
    exact = windows[windows["series"] == "exact"].set_index("origin")[["q0.5", "q0.9"]]
    forecast = model.predict(frame, origins)
    largest = forecast[forecast["series"] == "exact"].groupby("origin")[["q0.5", "q0.9"]].max()
    pd.testing.assert_frame_equal(exact, largest, check_names=False)


def test_the_coverage_guard_allows_for_how_few_windows_it_counted() -> None:
    # The cheaper-loss candidate covered 0.80 at q0.9: within chance over a day of half-hour
    # windows, a real shortfall over a day of 5-minute ones.
    losses, shortfalls = [1.0, 2.0], [0.10, 0.0]
    assert select_candidate(losses, shortfalls, coverage_slack(0.9, 48)) == 0
    assert select_candidate(losses, shortfalls, coverage_slack(0.9, 288)) == 1
    assert coverage_slack(0.9, 48) > coverage_slack(0.99, 48)  # a tighter binomial at 0.99


def test_a_combination_without_a_window_candidate_has_no_window() -> None:
    model = combination().fit(daily(days=4, seed=0, series="s"))
    assert model.window_span is None and model.predict_window(daily(4, 0, "s")) is None


def test_the_default_candidates_forecast_the_window_the_plan_sizes_for() -> None:
    # the registered default weighs window models, so a plan on it sizes for the window's
    # maximum, not the largest of the per-horizon quantiles
    model = make_model("combination", horizons=HORIZONS, quantiles=QUANTILES)
    assert model.window_span == (min(HORIZONS), max(HORIZONS))


def test_weights_are_learned_out_of_sample_and_read_nothing_after_the_cut() -> None:
    # The noise doubles in the last day: error bands fitted on it differ from those before it.
    frame = daily(days=6, seed=2, series="s", noise=2.0)
    last_day = frame["timestamp"] >= frame["timestamp"].max() - pd.Timedelta("1d")
    frame.loc[last_day, "value"] += np.random.default_rng(3).normal(0, 8, last_day.sum())
    cut = frame["timestamp"].max() - pd.Timedelta("12h")
    train = frame[frame["timestamp"] < cut]
    model = combination(validation_window="1d").fit(train)

    # By hand: the candidates fitted before the validation window forecast its origins.
    grid = pd.Timedelta(seconds=STEP)
    start = train["timestamp"].max() - (86400 // STEP - 1) * grid
    origins = pd.date_range(start, train["timestamp"].max() - grid, freq=grid)
    before = train[train["timestamp"] < start]
    actual = train.set_index("timestamp")["value"]

    def weights(fitted_on: pd.DataFrame) -> np.ndarray:
        forecasts = [
            make_model(name, horizons=HORIZONS, quantiles=QUANTILES)
            .fit(fitted_on)
            .predict(train, origins)
            for name in CANDIDATES
        ]
        observed = actual.reindex(forecasts[0]["target_time"]).to_numpy()
        known = np.isfinite(observed)
        return np.stack(
            [
                pinball_weights(
                    np.column_stack([f[f"q{q:g}"].to_numpy()[known] for f in forecasts]),
                    observed[known],
                    q,
                )
                for q in QUANTILES
            ],
            axis=1,
        )

    np.testing.assert_allclose(model.weights_["s"], weights(before), atol=1e-6)
    # Candidates that had seen the validation window would have weighed it otherwise.
    assert not np.allclose(weights(train), weights(before), atol=1e-3)

    # Whatever follows the training cut, the weights and the forecasts at the cut are the same.
    corrupted = frame.copy()
    after = corrupted["timestamp"] >= cut
    corrupted.loc[after, "value"] = corrupted.loc[after, "value"] * 7 + 3
    again = combination(validation_window="1d").fit(corrupted[corrupted["timestamp"] < cut])
    np.testing.assert_array_equal(again.weights_["s"], model.weights_["s"])
    last = pd.DatetimeIndex([train["timestamp"].max()])
    pd.testing.assert_frame_equal(model.predict(frame, last), again.predict(corrupted, last))


def test_an_unseen_series_gets_the_average_weights() -> None:
    frame = pd.concat([daily(5, 0, "a"), daily(5, 1, "b", noise=3.0)], ignore_index=True)
    model = combination().fit(frame)
    np.testing.assert_allclose(
        model.default_weights_, (model.weights_["a"] + model.weights_["b"]) / 2
    )
    unseen = daily(5, 2, "c").tail(200)
    out = model.predict(unseen)
    assert len(out) == len(HORIZONS) and np.isfinite(out[["q0.5", "q0.9"]]).all().all()


@pytest.mark.parametrize(
    ("step", "days", "cells"),
    [
        (300, 8, MIN_VALIDATION_CELLS),  # one day of 5-minute cells
        (60, 8, 1440),  # one day
        (1800, 40, MIN_VALIDATION_CELLS),  # six days: a day would be 48 windows
        (1800, 12, 12 * 48 // 4),  # a quarter of a history too short for six days
    ],
)
def test_the_default_validation_window_counts_enough_windows(
    step: int, days: int, cells: int
) -> None:
    times = pd.date_range("2026-03-02", periods=days * 86400 // step, freq=f"{step}s", tz="UTC")
    values = 50 + 10 * np.sin(2 * np.pi * np.arange(len(times)) * step / 86400)
    frame = pd.DataFrame({"series": "s", "timestamp": times, "value": values})
    model = combination(max_origins=10_000).fit(frame)
    origins, cut = model._validation_origins(frame)
    assert cut == times[-cells]
    assert origins[0] == cut and len(origins) == cells - min(HORIZONS)


@pytest.mark.parametrize(
    ("name", "decided"),
    [("combination", "its weights are fitted on"), ("auto", "its model is picked on")],
)
def test_a_validation_window_longer_than_the_history_is_refused(name: str, decided: str) -> None:
    # auto is a combination too; its message spoke of "the combination", a model not asked for
    match = f"the validation window {decided} \\(672 cells\\)"
    with pytest.raises(NotEnoughHistoryError, match=match):
        make_model(name, validation_window="7d").fit(daily(days=3, seed=0, series="s"))


def test_a_validation_window_with_nothing_observed_is_refused() -> None:
    frame = daily(days=4, seed=0, series="s")
    frame.loc[frame["timestamp"] >= frame["timestamp"].max() - pd.Timedelta("1d"), "value"] = None
    with pytest.raises(
        NotEnoughHistoryError, match="no target observed in the validation window its weights"
    ):
        combination().fit(frame)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"candidates": ("ewma", "prophet")}, r"`candidates`: 'prophet' is not a registered"),
        ({"candidates": ("ewma", "combination")}, r"`candidates`: 'combination' is not"),
        ({"candidates": ("ewma", "ewma")}, r"`candidates` must be a list of distinct"),
        ({"candidates": "ewma"}, r"`candidates` must be a list .*got 'ewma'"),
        ({"method": "vote"}, r"`method` must be one of \['weights', 'select'\], got 'vote'"),
        ({"candidate_params": {"intermittent": {}}}, r"`candidate_params` names .*'intermittent'"),
        ({"taus": {"chat": 1.5}}, r"`taus`: 'chat' must lie in \(0, 1\), got 1.5"),
        ({"max_rows": 1}, r"`max_rows` must be a whole number >= 2, got 1"),
    ],
)
def test_bad_params_name_the_field_and_the_value(params: dict[str, object], match: str) -> None:
    model = Combination(horizons=HORIZONS, quantiles=QUANTILES, **params)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=match):
        model.check_params()
