"""The intermittent-demand model on mostly-zero series: sane quantiles, no division by ~0."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from forecaster.models import make_model

STEP = 60
QUANTILES = (0.5, 0.9, 0.98, 0.995)


def sparse(cells: int, seed: int, p: float, series: str = "gpu") -> pd.DataFrame:
    """Demand in a share ``p`` of the cells, of log-normal size around 20."""
    rng = np.random.default_rng(seed)
    value = np.where(rng.random(cells) < p, rng.lognormal(np.log(20.0), 0.4, cells), 0.0)
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    return pd.DataFrame({"series": series, "timestamp": times, "value": value})


def model(**params: object):
    return make_model("intermittent", horizons=(1, 5), quantiles=QUANTILES, **params)


def test_quantiles_of_a_sparse_series_are_zero_then_the_demand_size() -> None:
    frame = sparse(4 * 1440, seed=0, p=0.05)
    cut = frame["timestamp"].iloc[3 * 1440]
    fitted = model().fit(frame[frame["timestamp"] < cut])
    later = frame[frame["timestamp"] >= cut]
    out = fitted.predict(frame, pd.DatetimeIndex(later["timestamp"].iloc[:-5]))
    # No demand in 95% of the cells: the median is zero, q0.9 almost always (the share of cells
    # with demand is smoothed over an hour: it passes 10% now and then); q0.995 is a size.
    assert (out["q0.5"] == 0).all() and (out["q0.9"] == 0).mean() > 0.95
    assert (out["q0.995"] > 0).all()
    # Sizes are around 20: the top quantile is a size, not a smeared-out average (~1).
    assert 10 < out["q0.995"].median() < 60
    actual = frame.set_index("timestamp")["value"].reindex(out["target_time"]).to_numpy()
    for q in (0.98, 0.995):
        coverage = float(np.mean(actual <= out[f"q{q:g}"].to_numpy()))
        assert abs(coverage - q) < 0.015, (q, coverage)


def test_an_all_zero_series_forecasts_zero_without_a_warning() -> None:
    frame = pd.concat(
        [sparse(600, seed=1, p=0.0, series="idle"), sparse(600, seed=2, p=0.1, series="busy")],
        ignore_index=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by zero or an empty quantile would warn
        out = model().fit(frame).predict(frame)
        alone = model().fit(frame[frame["series"] == "idle"]).predict(frame)
    idle = out[out["series"] == "idle"]
    assert (idle[[f"q{q:g}" for q in QUANTILES]].to_numpy() == 0).all()
    assert (alone[[f"q{q:g}" for q in QUANTILES]].to_numpy() == 0).all()
    assert out.loc[out["series"] == "busy", "q0.995"].gt(0).all()


def test_tiny_demand_is_not_divided_into_huge_ratios() -> None:
    # Sizes of 1e-12 are below any level worth dividing by: they never become a ratio.
    frame = sparse(2000, seed=3, p=0.05)
    frame.loc[frame.index[::97], "value"] = 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = model().fit(frame).predict(frame)
    assert np.isfinite(out[[f"q{q:g}" for q in QUANTILES]].to_numpy()).all()
    assert out["q0.995"].max() < 200


def test_a_short_series_borrows_the_pooled_size_distribution() -> None:
    frame = pd.concat(
        [sparse(3000, seed=4, p=0.2, series="long"), sparse(300, seed=5, p=0.03, series="new")],
        ignore_index=True,
    )
    fitted = model(min_sizes=30).fit(frame)
    assert "long" in fitted.ratios_ and "new" not in fitted.ratios_
    assert fitted.predict(frame).groupby("series")["q0.995"].max().gt(0).all()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"min_sizes": 0}, r"`min_sizes` must be a whole number >= 1, got 0"),
        ({"occurrence_halflife": "soon"}, r"occurrence_halflife"),
    ],
)
def test_bad_params_name_the_field(params: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        model(**params).check_params()
