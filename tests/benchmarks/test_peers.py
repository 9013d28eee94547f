"""The peer adapters keep the forecast protocol and never read past an origin."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip(
    "statsforecast", reason="statsforecast is an optional extra: pip install -e '.[bench]'"
)
pytest.importorskip(
    "mlforecast", reason="mlforecast is an optional extra: pip install -e '.[bench]'"
)

from benchmarks.peers import PEERS, make_peer
from forecaster.exceptions import UnknownNameError
from forecaster.frame import regularize, validate_frame
from forecaster.scenarios import steady_diurnal

STEP = 1800  # half-hourly keeps the daily season at 48 cells, so every fit takes well under 1 s
HORIZONS = (1, 3)
QUANTILES = (0.1, 0.5, 0.9)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return regularize(validate_frame(steady_diurnal(days=16, step=STEP, seed=3)), STEP)


def _origins(frame: pd.DataFrame, first: int, count: int) -> pd.DatetimeIndex:
    times = pd.DatetimeIndex(frame["timestamp"])
    return times[first : first + count]


@pytest.mark.parametrize("name", sorted(PEERS))
def test_corrupting_the_future_leaves_forecasts_at_earlier_origins_unchanged(
    frame: pd.DataFrame, name: str
) -> None:
    origins = _origins(frame, len(frame) - 60, 12)
    cut = origins[5]
    peer = make_peer(name, horizons=HORIZONS, quantiles=QUANTILES)
    peer.fit(frame[frame["timestamp"] <= origins[0]])
    clean = peer.predict(frame, origins)

    corrupted = frame.copy()
    after = corrupted["timestamp"] > cut
    rng = np.random.default_rng(0)
    corrupted.loc[after, "value"] = corrupted.loc[after, "value"] * 50 + rng.uniform(
        0, 1000, int(after.sum())
    )
    corrupted.loc[corrupted.index[after][::7], "value"] = np.nan  # gaps after the origin too
    dirty = peer.predict(corrupted, origins)

    upto = clean["origin"] <= cut
    pd.testing.assert_frame_equal(
        clean[upto].reset_index(drop=True), dirty[dirty["origin"] <= cut].reset_index(drop=True)
    )
    # The corruption is visible where it is allowed to be: later origins see it.
    later = ["q0.5", "q0.9"]
    assert not np.allclose(clean.loc[~upto, later], dirty.loc[dirty["origin"] > cut, later])


@pytest.mark.parametrize("name", sorted(PEERS))
def test_peer_output_follows_the_forecast_contract(frame: pd.DataFrame, name: str) -> None:
    origins = _origins(frame, len(frame) - 30, 10)
    peer = make_peer(name, horizons=HORIZONS, quantiles=QUANTILES)
    forecast = peer.fit(frame[frame["timestamp"] <= origins[0]]).predict(frame, origins)

    assert list(forecast.columns) == [
        "series",
        "origin",
        "target_time",
        "horizon",
        "q0.1",
        "q0.5",
        "q0.9",
    ]
    assert len(forecast) == len(origins) * len(HORIZONS)
    assert set(forecast["origin"]) == set(origins)
    step = pd.to_timedelta(forecast["horizon"] * STEP, unit="s")
    assert (forecast["target_time"] == forecast["origin"] + step).all()
    values = forecast[["q0.1", "q0.5", "q0.9"]].to_numpy()
    assert np.isfinite(values).all() and (values >= 0).all()
    assert (np.diff(values, axis=1) >= 0).all()
    # Forecasts land near the series' level, not at a placeholder.
    level = frame["value"].tail(7 * 48).mean()
    assert 0.2 * level < forecast["q0.5"].mean() < 5 * level


def test_unknown_peer_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownNameError, match="statsforecast-mstl"):
        make_peer("prophet")
