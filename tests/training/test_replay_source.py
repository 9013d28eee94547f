from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forecaster.exceptions import ConfigError
from training.sources.files import ReplaySource

DATA = Path(__file__).resolve().parents[2] / "data"
NOW = pd.Timestamp("2030-06-01 12:02:30", tz="UTC")


class Clock:
    def __init__(self, now: pd.Timestamp) -> None:
        self.now = now

    def __call__(self) -> pd.Timestamp:
        return self.now


def replay(clock: Clock, holdback: int = 86400) -> ReplaySource:
    return ReplaySource(
        files={
            "google": DATA / "google_cluster_cpu_5min.csv",  # 2019
            "viral": DATA / "synthetic_viral_launch_5min.csv",  # 2026
        },
        holdback=holdback,
        clock=clock,
    )


def test_each_file_is_shifted_to_end_holdback_after_now():
    clock = Clock(NOW)
    source = replay(clock)
    start = NOW - pd.Timedelta(days=3)
    history = source.fetch({"google": "google", "viral": "viral"}, start, NOW, 300)
    frame = history.frame
    for name, path in (
        ("google", "google_cluster_cpu_5min.csv"),
        ("viral", "synthetic_viral_launch_5min.csv"),
    ):
        part = frame[frame["series"] == name].set_index("timestamp")["value"]
        assert part.index.max() == NOW.floor("5min")
        raw = pd.read_csv(DATA / path)
        # The visible end is the file's last value one day (the holdback) before its end.
        assert part.iloc[-1] == pytest.approx(raw["value"].iloc[-1 - 288])
        assert part.notna().all()


def test_the_held_back_tail_arrives_as_time_passes():
    clock = Clock(NOW)
    source = replay(clock)
    first = source.fetch({"viral": "viral"}, NOW - pd.Timedelta(hours=1), NOW, 300).frame
    clock.now = NOW + pd.Timedelta(minutes=10)
    later = source.fetch({"viral": "viral"}, NOW - pd.Timedelta(hours=1), clock.now, 300).frame
    assert later["timestamp"].max() - first["timestamp"].max() == pd.Timedelta(minutes=10)
    # Already visible points do not move when the clock advances.
    common = first.merge(later, on=["series", "timestamp"], suffixes=("_then", "_now"))
    assert len(common) == len(first)
    assert (common["value_then"] == common["value_now"]).all()


def test_negative_holdback_is_refused():
    with pytest.raises(ConfigError, match="`holdback` must be >= 0 seconds, got -1"):
        replay(Clock(NOW), holdback=-1)
