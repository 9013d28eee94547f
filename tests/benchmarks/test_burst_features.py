"""The burst benchmark's buffer measurement, on bursts that cluster and bursts that do not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.burst_features import buffer_rows, parse_args
from benchmarks.forecast_accuracy import Dataset

STEP = 300


def dataset(clustered: bool, seed: int = 0) -> Dataset:
    """21 days of noise around 10 with 10-minute bursts (4x): every 3 hours on alternate
    three-day stretches when ``clustered``, else every 6 hours on every day."""
    cells = 21 * 86400 // STEP
    rng = np.random.default_rng(seed)
    value = 10 + rng.normal(0, 0.5, cells)
    day = np.arange(cells) * STEP // 86400
    starts = np.arange(0, cells, 36 if clustered else 72)
    if clustered:
        starts = starts[(day[starts] // 3) % 2 == 1]
    for start in starts:
        value[start : start + 2] *= 4
    times = pd.date_range("2026-03-02", periods=cells, freq=f"{STEP}s", tz="UTC")
    frame = pd.DataFrame({"series": "s", "timestamp": times, "value": value})
    return Dataset("clustered" if clustered else "spread", "synthetic", frame, STEP, "test")


def test_a_regime_buffer_pays_where_bursts_cluster_and_not_where_they_do_not() -> None:
    # Six hours see a busy stretch from its first burst on: the regime is known from then.
    clustered = buffer_rows(dataset(clustered=True), "6h", 6.0)
    # Busy stretches need the burst-sized buffer, quiet ones far less: split, the loss drops.
    assert clustered["per regime"]["pinball"] < 0.8 * clustered["pooled"]["pinball"]
    assert clustered["per regime"]["mean_buffer"] < clustered["pooled"]["mean_buffer"]
    spread = buffer_rows(dataset(clustered=False), "6h", 6.0)
    assert spread["per regime"]["pinball"] == pytest.approx(spread["pooled"]["pinball"], rel=0.1)
    for rows in (clustered, spread):
        assert all(0.0 <= row["coverage"] <= 1.0 for row in rows.values())
        assert all(row["mean_buffer"] >= 0.0 for row in rows.values())


def test_bad_arguments_exit_2_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse_args(["--models", "lightgbm,prophet"])
    assert raised.value.code == 2
    assert "unknown models ['prophet']" in capsys.readouterr().err
