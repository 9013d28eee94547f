from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError, NotEnoughHistoryError
from forecaster.frame import (
    Columns,
    fill_short_gaps,
    infer_step,
    parse_timestamps,
    regularize,
    sorted_by_series,
    validate_frame,
)


def frame(values, times=None, series="a"):
    times = times or [f"2026-01-01 00:0{i}:00" for i in range(len(values))]
    return pd.DataFrame({"series": series, "timestamp": times, "value": values})


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        pytest.param(
            frame([1.0, 2.0], ["2026-01-01 00:00", "yesterday"]),
            DataValidationError,
            r"unparseable timestamps .* row 1: 'yesterday'",
            id="unparseable-timestamp",
        ),
        pytest.param(
            frame([1.0, 2.0], ["2026-01-01 00:00", "2026-01-01 00:00"]),
            DataValidationError,
            # the whole time, not Timestamp('2026-01-01 00:0... cut by the echo's bound
            r"duplicate \(series, timestamp\) pairs at rows 0: '2026-01-01T00:00:00\+00:00', "
            r"1: '2026-01-01T00:00:00\+00:00'",
            id="duplicate-timestamp",
        ),
        pytest.param(
            frame([1.0, 2.0], ["2026-01-01 00:00", "now"]),
            DataValidationError,
            r"unparseable timestamps .* row 1: 'now'",
            id="clock-word-is-not-a-time",
        ),
        pytest.param(
            frame([1.0, "many"]),
            DataValidationError,
            r"non-numeric values at row 1: 'many'",
            id="non-numeric",
        ),
        pytest.param(
            frame([1.0, np.nan]),
            DataValidationError,
            r"no value \(an empty field or NaN\) at row 1",
            id="nan",
        ),
        pytest.param(
            frame([1.0, np.inf]), DataValidationError, r"infinite values at row 1: inf", id="inf"
        ),
        pytest.param(
            frame([1.0, -3.0]),
            DataValidationError,
            r"negative demand at row 1: -3.0",
            id="negative",
        ),
        pytest.param(
            frame([1.0]),
            NotEnoughHistoryError,
            r"at least 2 observed rows.*'a' has 1",
            id="too-short",
        ),
        pytest.param(
            frame([1.0, 2.0]).drop(columns="value"),
            DataValidationError,
            r"lacks column\(s\) \['value'\]",
            id="missing-column",
        ),
        pytest.param(
            frame([True, False]),
            DataValidationError,
            r"must be numeric, got booleans",
            id="booleans",
        ),
    ],
)
def test_validation_errors_name_the_problem_and_rows(bad, error, match):
    with pytest.raises(error, match=match):
        validate_frame(bad)


def test_validation_lists_at_most_five_rows_and_counts_the_rest():
    bad = frame([-1.0] * 8, [f"2026-01-01 00:0{i}:00" for i in range(8)])
    with pytest.raises(DataValidationError, match=r"rows 0: -1.0, .*4: -1.0 and 3 more"):
        validate_frame(bad)


def test_validation_sorts_and_keeps_custom_column_names():
    raw = pd.DataFrame(
        {"w": ["b", "a", "a"], "ts": [120, 60, 0], "rps": ["3", 2, 1.5], "ignored": 0}
    )
    out = validate_frame(raw, columns=Columns("w", "ts", "rps"), min_rows=1)
    assert list(out.columns) == ["w", "ts", "rps"]
    assert out["w"].tolist() == ["a", "a", "b"]
    assert out["rps"].tolist() == [1.5, 2.0, 3.0]
    assert str(out["ts"].dt.tz) == "UTC"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(["2026-01-01 10:00:00"], "2026-01-01 10:00:00+00:00", id="naive-is-utc"),
        pytest.param(["2026-01-01T12:00:00+02:00"], "2026-01-01 10:00:00+00:00", id="offset"),
        pytest.param([1767261600], "2026-01-01 10:00:00+00:00", id="unix-seconds"),
        pytest.param(
            ["2023-11-16 18:15:46.6805900"], "2023-11-16 18:15:46.680590+00:00", id="fraction"
        ),
    ],
)
def test_timestamps_parse_to_utc(raw, expected):
    assert str(parse_timestamps(pd.Series(raw), column="t").iloc[0]) == expected


def test_infer_step_uses_the_most_common_gap_per_series():
    times = pd.to_datetime([0, 300, 600, 1500, 0, 300], unit="s", utc=True)
    data = pd.DataFrame({"series": list("aaaabb"), "timestamp": times, "value": 1.0})
    assert infer_step(data) == 300


def test_fill_short_gaps_fills_only_short_interior_runs():
    values = np.array([np.nan, 1.0, np.nan, 3.0, np.nan, np.nan, np.nan, 7.0, np.nan])
    out = fill_short_gaps(values, 2)
    np.testing.assert_allclose(out[1:4], [1.0, 2.0, 3.0])
    assert np.isnan(out[[0, 4, 5, 6, 8]]).all()


def test_regularize_floors_averages_fills_and_keeps_long_gaps():
    seconds = [0, 70, 100, 180, 240, 600, 660]
    values = [1.0, 2.0, 4.0, 5.0, 6.0, 10.0, 11.0]
    raw = validate_frame(
        pd.DataFrame(
            {"series": "a", "timestamp": pd.to_datetime(seconds, unit="s"), "value": values}
        )
    )
    out = regularize(raw, 60, max_fill=1)
    assert out["timestamp"].diff().dropna().eq(pd.Timedelta("60s")).all()
    got = out["value"].to_numpy()
    # 70 s and 100 s share the 60 s cell, the empty 120 s cell is interpolated, and
    # 300..540 s is a five-cell gap that stays missing.
    np.testing.assert_allclose(got[:5], [1.0, 3.0, 4.0, 5.0, 6.0])
    assert np.isnan(got[5:10]).all()
    np.testing.assert_allclose(got[10:], [10.0, 11.0])


def test_regularize_fills_a_one_cell_gap():
    raw = validate_frame(
        pd.DataFrame(
            {
                "series": "a",
                "timestamp": pd.to_datetime([0, 60, 180], unit="s"),
                "value": [1.0, 2, 4],
            }
        )
    )
    np.testing.assert_allclose(regularize(raw, 60)["value"], [1.0, 2.0, 3.0, 4.0])


def _shuffled_fleet(seed: int) -> pd.DataFrame:
    """Three series on 1- and 5-minute grids with a few cells missing, rows shuffled."""
    rng = np.random.default_rng(seed)
    parts = []
    for name, step in (("web", 60), ("api", 300), ("batch", 60)):
        cells = np.flatnonzero(rng.random(30) < 0.8) * step
        values = rng.random(len(cells))
        values[rng.random(len(cells)) < 0.2] = np.nan
        times = pd.to_datetime(1_772_323_200 + cells, unit="s", utc=True)
        parts.append(pd.DataFrame({"series": name, "timestamp": times, "value": values}))
    return pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=seed)


@pytest.mark.parametrize("seed", range(5))
def test_a_valid_frame_comes_back_sorted_and_unchanged_otherwise(seed):
    data = _shuffled_fleet(seed)
    want = data.sort_values(["series", "timestamp"], ignore_index=True)
    pd.testing.assert_frame_equal(validate_frame(data, allow_missing=True), want)


def test_duplicates_are_named_in_the_frame_s_row_order():
    data = frame([1.0, 2.0, 3.0, 4.0], ["00:03", "00:01", "00:02", "00:01"])
    with pytest.raises(DataValidationError, match=r"pairs at rows 1: .*, 3: "):
        validate_frame(data.assign(timestamp=pd.to_datetime("2026-01-01 " + data["timestamp"])))


def test_short_series_are_named_in_the_order_they_come():
    times = [f"2026-01-01 00:0{i}:00" for i in range(5)]
    data = pd.DataFrame(
        {"series": list("zzyxx"), "timestamp": times, "value": [1.0, np.nan, 2.0, 3.0, 4.0]}
    )
    with pytest.raises(NotEnoughHistoryError, match=r"too short: 'z' has 1, 'y' has 1$"):
        validate_frame(data, allow_missing=True)


def _infer_step_by_sorting(data: pd.DataFrame) -> int:
    """The reference: sort, then the most common positive gap within a series."""
    times = data.sort_values(["series", "timestamp"])
    ns = times["timestamp"].astype("int64")
    same_series = times["series"].eq(times["series"].shift())
    diffs = ns.diff()[same_series & ns.diff().gt(0)]
    return max(round(float(diffs.mode().iloc[0]) / 1e9), 1)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("order", ["shuffled", "sorted"])
def test_the_step_is_the_one_of_the_sorted_frame(seed, order):
    data = _shuffled_fleet(seed)
    if order == "sorted":
        data = data.sort_values(["series", "timestamp"])
    assert infer_step(data) == _infer_step_by_sorting(data)


def test_a_tie_between_gaps_is_the_smaller_gap():
    times = pd.to_datetime([0, 60, 120, 0, 300, 600], unit="s", utc=True)
    data = pd.DataFrame({"series": list("aaabbb"), "timestamp": times, "value": 1.0})
    assert infer_step(data) == 60


def test_categorical_ids_are_never_taken_as_sorted():
    # a categorical sorts by its categories' order: names in text order may still need a sort
    ids = pd.Series(pd.Categorical(["a", "a", "b"], categories=["b", "a"]))
    times = pd.Series(pd.to_datetime([0, 60, 0], unit="s", utc=True))
    assert not sorted_by_series(ids, times)
    assert sorted_by_series(ids.astype(str), times)
