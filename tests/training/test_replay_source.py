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


WEEK = pd.Timedelta(days=7)


def test_the_present_is_the_common_end_less_the_holdback_moved_by_whole_weeks():
    source = replay(Clock(NOW))
    present = source.default_end(300)
    assert NOW - WEEK < present <= NOW
    history = source.fetch({"google": "google", "viral": "viral"}, present - WEEK, present, 300)
    frame = history.frame
    raw = {
        name: pd.read_csv(DATA / path, parse_dates=["timestamp"]).set_index("timestamp")["value"]
        for name, path in (
            ("google", "google_cluster_cpu_5min.csv"),
            ("viral", "synthetic_viral_launch_5min.csv"),
        )
    }
    ends = {
        name: values.index[-1].tz_localize(None).tz_localize("UTC") for name, values in raw.items()
    }
    # viral ends on a Sunday, google on a Tuesday: google moves to the Tuesday after viral's
    # end (the nearest whole week), so the common end is viral's, and the present is a day,
    # the holdback, before it: both moved by whole weeks.
    viral_end = present + pd.Timedelta(days=1)
    assert (viral_end - ends["viral"]) % WEEK == pd.Timedelta(0)
    expected_end = {"viral": viral_end, "google": viral_end + pd.Timedelta(days=2)}
    for name, values in raw.items():
        shift = expected_end[name] - ends[name]
        assert shift % WEEK == pd.Timedelta(0)  # every point keeps its calendar
        part = frame[frame["series"] == name].set_index("timestamp")["value"]
        assert part.notna().all()
        moved = values.copy()
        moved.index = moved.index.tz_localize(None).tz_localize("UTC") + shift
        assert (part.to_numpy() == moved.reindex(part.index).to_numpy()).all(), name


def test_the_recording_plays_its_last_week_again_to_reach_now():
    clock = Clock(NOW)
    source = replay(clock)
    recorded_end = source.default_end(300) + pd.Timedelta(days=1)  # viral's end, moved
    clock.now = recorded_end + 2 * WEEK + pd.Timedelta(hours=5)
    now = clock.now.floor("5min")
    values = source.fetch({"viral": "viral"}, recorded_end - 2 * WEEK, now, 300).frame.set_index(
        "timestamp"
    )["value"]
    assert values.index[-1] == now
    replayed = values[values.index > recorded_end]
    assert len(replayed) == (now - recorded_end) // pd.Timedelta(minutes=5)
    assert replayed.notna().all()
    assert (replayed.to_numpy() == values.reindex(replayed.index - WEEK).to_numpy()).all()


def test_different_clocks_see_the_same_present_values():
    windows = []
    for now in (NOW, NOW + pd.Timedelta(days=2, hours=7, minutes=35)):
        source = replay(Clock(now))
        present = source.default_end(300)
        frame = source.fetch({"viral": "viral"}, present - WEEK, present, 300).frame
        windows.append((present, frame["value"].to_numpy()))
    (first, values), (second, others) = windows
    assert (second - first) % WEEK == pd.Timedelta(0)
    assert (values == others).all()


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
