"""A large training set's origins, and its calibration window's, are sampled before their
features are built: uniformly over every series' cells, seeded, and only when more rows would
be built than the fit can use."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forecaster.models.quantile_gbm as quantile_gbm
from forecaster.models.quantile_gbm import QuantileGradientBoosting
from forecaster.scenarios import gpu_inference_demand


def _origins(lengths: list[int]) -> list[np.ndarray]:
    return [np.arange(5, 5 + n, dtype=np.int64) for n in lengths]


def test_origins_that_fit_the_rows_are_kept_whole() -> None:
    model = QuantileGradientBoosting(horizons=(1, 2), max_train_rows=100)
    origins = _origins([40, 60])  # 200 rows: twice max_train_rows, not more
    kept = model._sampled_origins(origins)
    assert all(a is b for a, b in zip(kept, origins, strict=True))


def test_the_sample_is_uniform_over_the_fleet_and_seeded() -> None:
    model = QuantileGradientBoosting(horizons=(1, 2, 3, 4), max_train_rows=1_000, random_state=3)
    origins = _origins([20_000, 60_000, 0, 20_000])
    kept = model._sampled_origins(origins)
    # Twice the origins whose four rows each fill max_train_rows.
    assert sum(len(k) for k in kept) == 500
    for cells, sample in zip(origins, kept, strict=True):
        assert np.isin(sample, cells).all() and (np.diff(sample) > 0).all()
    shares = np.array([len(k) for k in kept]) / 500
    np.testing.assert_allclose(shares, [0.2, 0.6, 0.0, 0.2], atol=0.07)
    again = model._sampled_origins(origins)
    assert all((a == b).all() for a, b in zip(kept, again, strict=True))
    other = QuantileGradientBoosting(horizons=(1, 2, 3, 4), max_train_rows=1_000, random_state=4)
    assert any(
        len(a) != len(b) or (a != b).any()
        for a, b in zip(kept, other._sampled_origins(origins), strict=True)
    )


def test_the_window_target_keeps_twice_max_train_rows_origins() -> None:
    model = QuantileGradientBoosting(horizons=(1, 2, 3, 4), max_train_rows=1_000, target="window")
    kept = model._sampled_origins(_origins([30_000]))
    assert len(kept[0]) == 2_000  # one window row per origin


def test_a_fit_builds_the_features_of_the_sample_only(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = pd.concat(
        [gpu_inference_demand(days=6, step=300, seed=k, series=f"w{k}") for k in range(3)],
        ignore_index=True,
    )
    built: list[int] = []
    original = quantile_gbm.build_features

    def counted(panel, origins, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(sum(len(cells) for cells in origins))
        return original(panel, origins, *args, **kwargs)

    monkeypatch.setattr(quantile_gbm, "build_features", counted)
    model = QuantileGradientBoosting(
        horizons=(1, 2), quantiles=(0.5, 0.9), n_estimators=10, max_train_rows=500
    ).fit(frame)
    # Training: 500 origins (twice 500 rows over two horizons); the calibration window's
    # 3 x 432 origins are sampled alike.
    assert built == [500, 500]
    forecast = model.predict(frame)
    assert np.isfinite(forecast[["q0.5", "q0.9"]].to_numpy()).all()
