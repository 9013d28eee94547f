from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import forecaster.features
from forecaster.exceptions import ConfigError
from forecaster.features import (
    Event,
    FeatureConfig,
    build_features,
    feature_names,
    target_values,
    with_hour_phase,
)
from forecaster.panel import Panel

STEP = 60
START = int(pd.Timestamp("2026-01-03 23:50", tz="UTC").timestamp())  # a Saturday


def panel(values, covariate=None):
    values = np.asarray(values, dtype=float)
    covs = {} if covariate is None else {"gpu": (np.asarray(covariate, dtype=float),)}
    return Panel(STEP, ("a",), np.array([START]), (values,), covs)


def features_at(p, origin, horizons, config):
    matrix = build_features(p, [np.array([origin])], horizons, config)
    return pd.DataFrame(matrix.X.astype(float), columns=matrix.names), matrix


CONFIG = FeatureConfig(
    lags=(0, 2),
    windows=("3m",),
    window_stats=("mean", "max", "std"),
    seasonal_lags=("5m",),
    seasonal_smoothing=0,
    calendar=("minute_of_day", "hour", "day_of_week", "is_weekend"),
    covariate_lags=(1,),
    events=(Event("launch", "2026-01-04 00:00", "2026-01-04 00:30"),),
    scale_window="2m",
)


def test_every_feature_matches_a_hand_computation():
    y = np.arange(1.0, 21.0)  # y[i] = i + 1
    gpu = np.arange(100.0, 120.0)
    frame, matrix = features_at(panel(y, gpu), origin=9, horizons=(3,), config=CONFIG)
    row = frame.iloc[0]
    scale = (9 + 10) / 2  # mean of y[8], y[9]
    assert matrix.scale[0] == pytest.approx(scale)
    assert row["series_code"] == 0 and row["horizon"] == 3
    assert row["log_scale"] == pytest.approx(np.log1p(scale))
    assert row["lag_0"] == pytest.approx(10 / scale)
    assert row["lag_2"] == pytest.approx(8 / scale)
    assert row["mean_3m"] == pytest.approx(9 / scale)  # y[7..9] = 8, 9, 10
    assert row["max_3m"] == pytest.approx(10 / scale)
    assert row["std_3m"] == pytest.approx(1 / scale, rel=1e-5)
    # Target cell 12, one 5-cell season before: cell 7 (value 8). Level now (mean 3m at 9) is 9,
    # one season before the origin (mean 3m at 4) is 4: rescaled = 8 * 9 / 4.
    assert row["seasonal_5m"] == pytest.approx(8 / scale)
    assert row["seasonal_5m_rescaled"] == pytest.approx(8 * 9 / 4 / scale, rel=1e-5)
    # Target time: origin 23:59 + 3 min = 00:02 on Sunday 2026-01-04.
    assert row["cal_minute_of_day"] == 2
    assert row["cal_hour"] == 0
    assert row["cal_day_of_week"] == 6
    assert row["cal_is_weekend"] == 1
    assert row["gpu_lag_1"] == pytest.approx(108.0)
    assert row["event_launch"] == 1
    assert target_values(panel(y, gpu), matrix)[0] == 13.0


def test_event_flag_is_off_outside_the_window_and_lags_before_the_data_are_missing():
    y = np.arange(1.0, 21.0)
    frame, _ = features_at(panel(y, y), origin=1, horizons=(1,), config=CONFIG)
    assert frame.loc[0, "event_launch"] == 0  # target 23:52 Saturday
    assert np.isnan(frame.loc[0, "lag_2"])


def test_minute_of_hour_is_the_target_minutes_past_the_hour():
    config = FeatureConfig(calendar=("minute_of_day", "minute_of_hour", "hour"))
    # Origin 23:51 on Saturday; 1, 9 and 12 minutes on: 23:52, 00:00, 00:03.
    rows = [features_at(panel(np.ones(20)), 1, (h,), config)[0].iloc[0] for h in (1, 9, 12)]
    assert [row["cal_minute_of_hour"] for row in rows] == [52, 0, 3]
    assert [row["cal_minute_of_day"] for row in rows] == [1432, 0, 3]
    assert [row["cal_hour"] for row in rows] == [23, 0, 0]


def test_the_hours_phase_adds_the_minute_of_the_hour_and_a_lag_of_an_hour_and_nothing_else():
    default = FeatureConfig()
    hourly = with_hour_phase(default)
    assert hourly.calendar == ("minute_of_day", "minute_of_hour", "day_of_week", "is_weekend")
    assert hourly.seasonal_lags == ("1h", "1d", "7d")
    assert hourly == FeatureConfig(calendar=hourly.calendar, seasonal_lags=hourly.seasonal_lags)
    # a declaration keeps what it has; an hour already spelt otherwise is not doubled
    declared = FeatureConfig(lags=(0, 1), calendar=("hour",), seasonal_lags=("7d", "60m"))
    assert with_hour_phase(declared) == FeatureConfig(
        lags=(0, 1), calendar=("minute_of_hour", "hour"), seasonal_lags=("60m", "7d")
    )
    assert with_hour_phase(hourly) == hourly


def test_seasonal_lag_that_would_reach_past_the_origin_is_missing():
    y = np.arange(1.0, 40.0)
    frame, _ = features_at(panel(y), origin=20, horizons=(6,), config=CONFIG)
    assert np.isnan(frame.loc[0, "seasonal_5m"])


def test_names_match_the_matrix_and_short_windows_are_dropped():
    config = FeatureConfig(windows=("1m", "10m"), seasonal_lags=(), calendar=())
    names = feature_names(config, STEP, ["gpu"])
    assert "mean_1m" not in names and "mean_10m" in names
    _, matrix = features_at(panel(np.ones(30), np.ones(30)), 10, (1, 2), config)
    assert list(matrix.names) == names
    assert matrix.X.shape == (2, len(names))


def test_the_matrix_is_built_without_a_float64_copy_of_it():
    # Stacking every column in float64 and converting the stack peaked at about 6x the
    # float32 matrix here; column by column it is the matrix, the per-row index arrays
    # (about as large at 24 features) and the few columns being computed.
    rng = np.random.default_rng(3)
    cells = 3 * 1440
    values = tuple(rng.gamma(2.0, 10.0, cells) for _ in range(10))
    p = Panel(STEP, tuple(f"s{i}" for i in range(10)), np.full(10, START), values, {})
    origins = [np.arange(100, cells) for _ in values]
    tracemalloc.start()
    try:
        matrix = build_features(p, origins, (6,), FeatureConfig())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert matrix.X.dtype == np.float32 and matrix.X.shape == (10 * (cells - 100), 24)
    assert peak < 4 * matrix.X.nbytes


def _fleet(series: int, cells: int) -> tuple[Panel, list[np.ndarray]]:
    """``series`` series of ``cells`` cells (their lengths and starts differ a little, one
    has a gap), a covariate, and a few origins each."""
    rng = np.random.default_rng(8)
    values = [rng.gamma(2.0, 10.0, cells - 7 * (i % 3)) for i in range(series)]
    values[1][50:70] = np.nan
    names = tuple(f"s{i}" for i in range(series))
    starts = START + STEP * np.arange(series)
    gpu = tuple(rng.uniform(0, 1, len(v)) for v in values)
    origins = [np.array([0, 3, len(v) // 2, len(v) - 1]) for v in values]
    return Panel(STEP, names, starts, tuple(values), {"gpu": gpu}), origins


def test_a_fleet_built_a_group_of_series_at_a_time_is_the_one_pass_matrix(monkeypatch):
    p, origins = _fleet(series=7, cells=3 * 1440)
    config = FeatureConfig(covariate_lags=(0, 2), events=CONFIG.events, burst_window="2h")
    codes = [10 + i for i in range(7)]
    whole = build_features(p, origins, (1, 6), config, codes)
    # Groups of two series (four cells short of two whole ones), then one of one.
    monkeypatch.setattr(forecaster.features, "GROUP_CELLS", 2 * 3 * 1440 - 4)
    grouped = build_features(p, origins, (1, 6), config, codes)
    assert grouped.names == whole.names
    np.testing.assert_array_equal(grouped.X, whole.X)
    for field in ("series", "origin", "horizon"):
        np.testing.assert_array_equal(getattr(grouped, field), getattr(whole, field))
    # The scale is a difference of prefix sums, which start over with each group: equal up
    # to the last bits of a float64 (the matrix, in float32, is equal).
    np.testing.assert_allclose(grouped.scale, whole.scale, rtol=1e-10)


def test_window_statistics_are_held_for_one_group_of_series_at_a_time(monkeypatch):
    # A few origins over a long history: the window statistics' prefix arrays (8 bytes a
    # cell each) are the memory, and grouping bounds them by the group, not the fleet.
    p, origins = _fleet(series=20, cells=7 * 1440)

    def peak() -> int:
        tracemalloc.start()
        try:
            build_features(p, origins, (6,), FeatureConfig())
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole = peak()
    monkeypatch.setattr(forecaster.features, "GROUP_CELLS", 7 * 1440)
    assert peak() < whole / 8


@settings(max_examples=25, deadline=None)
@given(
    values=st.lists(st.floats(0, 1e4, allow_nan=False), min_size=40, max_size=80),
    origin_share=st.floats(0.1, 0.9),
    noise=st.floats(-1e3, 1e3),
    seed=st.integers(0, 2**16),
)
def test_no_feature_of_an_origin_changes_when_the_future_does(values, origin_share, noise, seed):
    y = np.asarray(values)
    origin = int(origin_share * (len(y) - 1))
    config = FeatureConfig(
        lags=(0, 1, 3),
        windows=("3m", "10m"),
        seasonal_lags=("5m", "12m"),
        seasonal_smoothing=1,
        covariate_lags=(0, 2),
        scale_window="7m",
        burst_window="6m",
        burst_reference="4m",
        burst_sigma=1.0,
    )
    rng = np.random.default_rng(seed)
    future = y.copy()
    future[origin + 1 :] = np.abs(future[origin + 1 :] + noise * rng.random(len(y) - origin - 1))
    future[origin + 1 :: 3] = np.nan  # gaps appearing in the future change nothing either
    covariate = y * 2
    covariate_future = covariate.copy()
    covariate_future[origin + 1 :] = rng.random(len(y) - origin - 1)
    before, _ = features_at(panel(y, covariate), origin, (1, 2, 4), config)
    after, _ = features_at(panel(future, covariate_future), origin, (1, 2, 4), config)
    np.testing.assert_array_equal(before.to_numpy(), after.to_numpy())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"lags": (-1,)}, r"`lags` and `covariate_lags` must be whole cells", id="lag"),
        pytest.param({"calendar": ("moon_phase",)}, r"`calendar` has unknown entries", id="cal"),
        pytest.param({"window_stats": ("median",)}, r"`window_stats` has unknown", id="stat"),
        pytest.param({"windows": ("ten minutes",)}, r"duration such as 30s", id="window"),
        pytest.param({"seasonal_smoothing": -1}, r"`seasonal_smoothing` must be >= 0", id="smooth"),
        pytest.param({"burst_sigma": 0}, r"`burst_sigma` must be a number > 0, got 0", id="sigma"),
        pytest.param({"burst_window": "often"}, r"duration such as 30s", id="burst"),
        pytest.param(
            {"events": (Event("x", "2026-01-02", "2026-01-01"),)},
            r"event 'x' must end after",
            id="event",
        ),
    ],
)
def test_config_errors_name_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        FeatureConfig(**kwargs)


def test_burst_features_count_each_series_own_bursts_and_forget_them_past_the_window():
    # A burst is judged against the 4 cells before it: one within 4 cells of another would be
    # measured against a reference that holds it, hence bursts 6 cells apart.
    quiet = np.tile([10.0, 11.0, 9.0, 10.0], 6)  # 24 cells: mean 10, std about 0.8
    spiky = quiet.copy()
    spiky[[8, 14]] = 40.0  # two bursts, 6 cells apart
    config = FeatureConfig(
        lags=(),
        windows=(),
        seasonal_lags=(),
        calendar=(),
        burst_window="8m",
        burst_reference="4m",
        burst_sigma=3.0,
    )
    # The quiet series comes first: a burst of its neighbour never counts for it.
    p = Panel(STEP, ("quiet", "spiky"), np.array([START, START]), (quiet, spiky))
    origins = [np.array([12, 15]), np.array([7, 8, 14, 15, 19, 21, 22])]
    matrix = build_features(p, origins, (1,), config)
    names = list(matrix.names)
    share = matrix.X[:, names.index("burst_share_8m")]
    since = matrix.X[:, names.index("burst_since_8m")]
    excess = matrix.X[:, names.index("burst_excess_8m")] * matrix.scale
    np.testing.assert_array_equal(share[:2], [0.0, 0.0])
    np.testing.assert_array_equal(since[:2], [1.0, 1.0])
    # Origins 7 (before any), 8 (at one), 14 (at the second), 15, 19 and 21 (the first out of
    # the 8-cell window), 22 (the second 8 cells back: none left).
    np.testing.assert_allclose(share[2:], [0, 1 / 8, 2 / 8, 2 / 8, 1 / 8, 1 / 8, 0])
    np.testing.assert_allclose(since[2:], [1, 0, 0, 1 / 8, 5 / 8, 7 / 8, 1])
    # Mean excess per cell over the window: 40 less the four cells before each burst.
    first = 40.0 - quiet[4:8].mean()
    assert excess[3] == pytest.approx(first / 8, rel=1e-6)
    assert excess[2] == 0.0


def test_config_round_trips_through_plain_data():
    assert FeatureConfig.from_dict(CONFIG.to_dict()) == CONFIG
