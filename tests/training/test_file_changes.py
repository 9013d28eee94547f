"""A file or replay source kept open for as long as a live consumer runs (``prewarm serve``
keeps one per fetch thread and never closes it) follows its files: one missing at start is
read once it exists, and rows appended to one are seen."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from training.exceptions import SourceError
from training.sources.files import FileSource, ReplaySource

STEP = 60
END = pd.Timestamp("2025-05-01T06:00:00Z")


def write(path: Path, end: pd.Timestamp, cells: int, level: float, series: str = "") -> Path:
    """A CSV of ``cells`` points at ``level`` up to ``end``; long (with a series column) when
    ``series`` is given."""
    times = pd.date_range(end=end, periods=cells, freq=f"{STEP}s", tz="UTC")
    frame = pd.DataFrame({"timestamp": times, "value": level})
    if series:
        frame.insert(0, "series", series)
    frame.to_csv(path, index=False)
    return path


def fetch(source: FileSource, name: str, end: pd.Timestamp = END) -> pd.Series:
    start = end - pd.Timedelta(minutes=30)
    frame = source.fetch({name: name}, start, end, STEP).frame
    return frame.set_index("timestamp")["value"].dropna()


def test_a_file_missing_at_start_is_read_once_it_exists(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = {"chat": write(tmp_path / "chat.csv", END, 120, 40.0), "embed": tmp_path / "e.csv"}
    source = FileSource(files=files)
    assert fetch(source, "chat").iloc[-1] == 40.0
    with caplog.at_level(logging.WARNING, logger="training.sources.files"):
        for _ in range(3):
            with pytest.raises(SourceError, match=r"e\.csv' does not exist"):
                fetch(source, "embed")
    # Said by the consumer the error is raised to (train's error, serve's throttled line), not
    # by the source as well.
    assert [r for r in caplog.records if "e.csv" in r.getMessage()] == []

    write(tmp_path / "e.csv", END, 120, 7.0)
    assert fetch(source, "embed").iloc[-1] == 7.0
    assert fetch(source, "chat").iloc[-1] == 40.0


def test_a_file_that_failed_is_read_again_once_fixed(tmp_path: Path) -> None:
    bad = tmp_path / "e.csv"
    bad.write_text("timestamp,value\n2025-05-01T05:00:00Z,-3\n")  # negative: refused
    files = {"chat": write(tmp_path / "chat.csv", END, 120, 40.0), "embed": bad}
    source = FileSource(files=files)
    with pytest.raises(SourceError, match="negative demand"):
        fetch(source, "embed")
    write(bad, END, 120, 7.0)
    assert fetch(source, "embed").iloc[-1] == 7.0


def test_a_failed_read_that_stat_cannot_see_is_tried_again_after_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error on a network mount leaves the file's stamp as it was: without a retry
    the workload would stay failed until the file happened to change."""
    from training.sources import files as files_module

    files = {
        "chat": write(tmp_path / "chat.csv", END, 120, 40.0),
        "embed": write(tmp_path / "embed.csv", END, 120, 7.0),
    }
    now = [0.0]
    source = FileSource(files=files, timer=lambda: now[0])
    real = files_module.load_history

    def io_error(path: Path, **kwargs: object) -> object:
        if path.name == "chat.csv":
            raise SourceError("file 'chat.csv' cannot be read: Input/output error")
        return real(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files_module, "load_history", io_error)  # the one injected failure
    with pytest.raises(SourceError, match="Input/output error"):
        fetch(source, "chat")
    monkeypatch.setattr(files_module, "load_history", real)  # the mount recovers
    now[0] = files_module.FAILED_RETRY - 1
    with pytest.raises(SourceError, match="Input/output error"):  # not read again yet
        fetch(source, "chat")
    assert fetch(source, "embed").iloc[-1] == 7.0  # the other workload is served meanwhile
    now[0] = files_module.FAILED_RETRY
    assert fetch(source, "chat").iloc[-1] == 40.0


def test_rows_appended_to_a_file_are_seen(tmp_path: Path) -> None:
    path = write(tmp_path / "demand.csv", END, 120, 40.0, series="chat")
    source = FileSource(path)
    assert fetch(source, "chat").index[-1] == END
    later = END + pd.Timedelta(minutes=5)
    with path.open("a") as out:
        for k in range(1, 6):
            t = END + pd.Timedelta(minutes=k)
            out.write(f"chat,{t.isoformat()},55.0\n")
    seen = fetch(source, "chat", later)
    assert seen.index[-1] == later and seen.iloc[-1] == 55.0


def test_an_unchanged_file_is_not_parsed_again(tmp_path: Path) -> None:
    files = {"chat": write(tmp_path / "chat.csv", END, 120, 40.0), "embed": tmp_path / "e.csv"}
    source = FileSource(files=files)
    fetch(source, "chat")
    parsed = source._parsed["chat"]
    write(tmp_path / "e.csv", END, 120, 7.0)  # another file changes: the cache is rebuilt...
    fetch(source, "embed")
    assert source._parsed["chat"] is parsed  # ...from chat's file as parsed before


def test_a_replay_file_missing_at_start_is_replayed_once_it_exists(tmp_path: Path) -> None:
    files = {
        "chat": write(tmp_path / "chat.csv", END, 3 * 7 * 1440, 40.0),
        "embed": tmp_path / "e.csv",
    }
    now = END + pd.Timedelta(days=30)
    source = ReplaySource(files=files, clock=lambda: now)
    present = source.default_end(STEP)
    with pytest.raises(SourceError, match=r"e\.csv' does not exist"):
        fetch(source, "embed", present)
    write(tmp_path / "e.csv", END, 3 * 7 * 1440, 7.0)
    assert fetch(source, "embed", present).iloc[-1] == 7.0
