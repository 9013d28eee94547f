"""The fitted level of ``ewma`` and ``mstl``: a half-life per series, fixed ones checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.duration import parse_duration
from forecaster.exceptions import ConfigError
from forecaster.models import make_model
from forecaster.models.baseline import AUTO, HALFLIFE_CELLS, UNSEEN_HALFLIFE, SmoothedLevel

STEP = 1800
DAY = 86400 // STEP
MODELS = ("ewma", "mstl")


def _walk_and_noise(seed: int) -> pd.DataFrame:
    """Two series on one grid: a random walk (the last value is the best level) and white noise
    around a constant (the longest smoothing is)."""
    rng = np.random.default_rng(seed)
    cells = 6 * DAY
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    walk = 500 + np.cumsum(rng.normal(0, 5.0, cells))
    noise = 100 + rng.normal(0, 5.0, cells)
    return pd.concat(
        [
            pd.DataFrame({"series": "walk", "timestamp": times, "value": walk}),
            pd.DataFrame({"series": "noise", "timestamp": times, "value": noise}),
        ],
        ignore_index=True,
    )


@pytest.mark.parametrize("name", MODELS)
def test_auto_fits_the_level_half_life_per_series(name: str) -> None:
    frame = _walk_and_noise(seed=3)
    model = make_model(name, horizons=(1, 2), quantiles=(0.5,)).fit(frame)
    assert isinstance(model, SmoothedLevel)
    assert model.halflife == AUTO
    assert model.halflives_["walk"] == HALFLIFE_CELLS[0] * STEP
    assert model.halflives_["noise"] == HALFLIFE_CELLS[-1] * STEP
    # Each series' own half-life beats the other's on it, out of sample: fitted on the first
    # draw, forecast over a second one.
    later = _walk_and_noise(seed=4)
    actual = later.set_index(["series", "timestamp"])["value"]
    origins = pd.DatetimeIndex(later["timestamp"].unique()[DAY:-2])

    def error(halflife: str, series: str) -> float:
        fitted = make_model(name, horizons=(1, 2), quantiles=(0.5,), halflife=halflife)
        out = fitted.fit(frame).predict(later, origins)
        out = out[out["series"] == series]
        truth = actual.loc[list(zip(out["series"], out["target_time"], strict=True))]
        return float(np.abs(out["q0.5"].to_numpy() - truth.to_numpy()).mean())

    shortest, longest = f"{STEP // 2}s", f"{int(HALFLIFE_CELLS[-1] * STEP)}s"
    assert error(shortest, "walk") < 0.5 * error(longest, "walk")
    assert error(longest, "noise") < 0.9 * error(shortest, "noise")


@pytest.mark.parametrize("name", MODELS)
def test_a_series_unseen_in_fit_gets_the_fixed_fallback(name: str) -> None:
    frame = _walk_and_noise(seed=5)
    model = make_model(name, horizons=(1,), quantiles=(0.5,))
    model.fit(frame[frame["series"] == "walk"])
    fallback = make_model(name, horizons=(1,), quantiles=(0.5,), halflife=UNSEEN_HALFLIFE)
    fallback.fit(frame[frame["series"] == "walk"])
    assert list(model.halflives_) == ["walk"]
    # The error quantiles were learned at different half-lives; with the same ones, the two
    # forecasts of the unseen series coincide only if its level is the fallback's.
    model.error_quantiles_ = fallback.error_quantiles_
    unseen = frame[frame["series"] == "noise"]
    origins = pd.DatetimeIndex(unseen["timestamp"].iloc[DAY:-1])
    pd.testing.assert_frame_equal(model.predict(unseen, origins), fallback.predict(unseen, origins))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("halflife", ["fast", "0s", "-5m"])
def test_a_bad_half_life_is_refused_naming_it(name: str, halflife: str) -> None:
    model = make_model(name, horizons=(1,), quantiles=(0.5,), halflife=halflife)
    with pytest.raises(ConfigError, match=rf"`halflife`.*'auto'.*got {halflife!r}"):
        model.check_params()
    with pytest.raises(ConfigError, match="halflife"):
        model.fit(_walk_and_noise(seed=6))


@pytest.mark.parametrize("name", MODELS)
def test_a_series_too_short_to_score_gets_the_fallback(name: str) -> None:
    frame = _walk_and_noise(seed=7)
    short = frame[frame["series"] == "walk"].head(3)  # no origin with a target 4 cells ahead
    model = make_model(name, horizons=(4,), quantiles=(0.5,)).fit(short)
    assert isinstance(model, SmoothedLevel)
    assert model.halflives_ == {"walk": parse_duration(UNSEEN_HALFLIFE)}
