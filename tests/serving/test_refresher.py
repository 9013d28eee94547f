"""The refresher: incremental fetches, one batched plan per tick, safe model swaps, and
failures that never turn into low numbers."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from prometheus_client import generate_latest

from serving.engine.models import ModelLoadFailedError, ModelWatcher
from serving.engine.observability import ServingMetrics
from serving.engine.refresher import SWITCH_INTERVAL, Refresher, _plan_rows, empty_snapshot
from serving.engine.snapshot import SnapshotStore
from serving.exceptions import ForecastUnavailableError, UnknownWorkloadError
from serving.wire.replies import Replies
from tests.serving.support import (
    STEP,
    DictRegistry,
    FrameSource,
    fit_planner,
    history,
    refresh_config,
    specs,
    wait_until,
    window_over,
)
from training.sources.files import FileSource

LEVELS = {"chat": 40.0, "embed": 7.0}


class CountingPlanner:
    """Delegates to a real planner and counts the calls (and can be made to fail)."""

    def __init__(self, inner: Any, result: str = "ok") -> None:
        self.inner = inner
        self.calls: list[tuple[str, ...]] = []
        self.result = result

    workloads = property(lambda self: self.inner.workloads)
    policies = property(lambda self: self.inner.policies)
    step = property(lambda self: self.inner.step)
    history_cells_needed = property(lambda self: self.inner.history_cells_needed)

    def plan(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.calls.append(tuple(sorted(set(frame["series"]))))
        plan = self.inner.plan(frame)
        if self.result == "nan":
            plan["forecast_demand"] = np.nan
        elif self.result == "raise":
            raise RuntimeError("model exploded")
        return plan


@pytest.fixture()
def now() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC")


def build(
    now: pd.Timestamp, planner: Any = None, **config: Any
) -> tuple[Refresher, FrameSource, DictRegistry]:
    frame = history(LEVELS, now, 200)
    source = FrameSource(frame)
    registry = DictRegistry("prewarm-test")
    registry.add(planner or fit_planner(frame, specs(LEVELS)))
    cfg = refresh_config(LEVELS, **config)
    store = SnapshotStore(empty_snapshot(cfg), Replies)
    # A clock that stands still: a refused version is not due again within a test.
    watcher = ModelWatcher(registry, cfg.model_name, poll_interval=float(STEP), clock=lambda: 0.0)
    watcher.check()  # what the watcher's thread does when the refresher runs
    refresher = Refresher(
        cfg, lambda: source, watcher, store, ServingMetrics(lambda: store.current)
    )
    return refresher, source, registry


def test_every_workload_s_counted_series_start_at_zero_before_the_first_refresh(
    now: pd.Timestamp,
) -> None:
    """Made at the first scoring, 10,000 workloads' series held the interpreter lock for
    about 0.3 s in the middle of serving; the last error's gauge is NaN until a forecast is
    scored (0 would read as a perfect forecast)."""
    refresher, _, _ = build(now)
    assert refresher.metrics is not None
    exported = generate_latest(refresher.metrics.registry).decode()
    for name in LEVELS:
        label = f'{{workload="{name}"}}'
        for series in (
            "prewarm_refused_values_total",
            "prewarm_forecast_covered_total",
            "prewarm_forecast_pinball_loss_count",
            "prewarm_forecast_abs_error_count",
        ):
            assert f"{series}{label} 0.0\n" in exported, series
        assert f"prewarm_forecast_last_abs_error{label} NaN\n" in exported


def test_scored_forecasts_are_counted_per_workload_at_its_own_quantile(
    now: pd.Timestamp,
) -> None:
    refresher, _, _ = build(now)
    metrics = refresher.metrics
    assert metrics is not None
    # chat at q0.9 under (by 2) then over (by 1); embed at q0.5 over by 4.
    metrics.score_many(
        ["chat", "chat", "embed"], [8.0, 11.0, 14.0], [10.0, 10.0, 10.0], [0.9, 0.9, 0.5]
    )
    exported = generate_latest(metrics.registry).decode()

    def value(series: str, workload: str) -> float:
        (line,) = [
            line
            for line in exported.splitlines()
            if line.startswith(f'{series}{{workload="{workload}"}} ')
        ]
        return float(line.split()[-1])

    assert value("prewarm_forecast_abs_error_count", "chat") == 2
    assert value("prewarm_forecast_abs_error_sum", "chat") == pytest.approx(3.0)
    assert value("prewarm_forecast_pinball_loss_sum", "chat") == pytest.approx(0.9 * 2 + 0.1 * 1)
    assert value("prewarm_forecast_covered_total", "chat") == 1
    assert value("prewarm_forecast_last_abs_error", "chat") == pytest.approx(1.0)
    assert value("prewarm_forecast_pinball_loss_sum", "embed") == pytest.approx(0.5 * 4)
    assert value("prewarm_forecast_covered_total", "embed") == 1
    assert value("prewarm_forecast_last_abs_error", "embed") == pytest.approx(4.0)


def test_first_tick_reads_the_window_then_only_new_points(now: pd.Timestamp) -> None:
    refresher, source, _ = build(now)
    snapshot = refresher.tick(now.to_pydatetime())
    # One source call for every workload, over the whole rolling window, once.
    ((names, start, end),) = source.calls
    assert sorted(names) == sorted(LEVELS)
    assert end - start >= pd.Timedelta(seconds=20 * STEP)
    assert snapshot.forecast("chat").desired_replicas >= 1

    source.calls.clear()
    later = now + pd.Timedelta(seconds=3 * STEP)
    source.extend(later, LEVELS)
    refresher.tick(later.to_pydatetime())
    # Again one call for all workloads, for only the three cells after the last one received.
    ((names, start, end),) = source.calls
    assert sorted(names) == sorted(LEVELS)
    assert end - start == pd.Timedelta(seconds=2 * STEP), (names, start, end)
    assert refresher.window is not None
    assert refresher.window.last_data("chat") == later.floor(f"{STEP}s")


def test_many_workloads_are_fetched_in_at_most_fetch_workers_calls(now: pd.Timestamp) -> None:
    levels = {f"w{i:03d}": 5.0 + i for i in range(300)}
    frame = history(levels, now, 60)
    source = FrameSource(frame)
    window = window_over(source, levels, 40, max_workers=3, batch_min=64)
    try:
        outcome = window.update(now)
        assert outcome.errors == {}
        assert len(source.calls) == 3
        assert sorted(n for names, _, _ in source.calls for n in names) == sorted(levels)
        # Each workload got its own values back, not a neighbour's.
        assert window.value_at("w123", now.floor(f"{STEP}s")) == pytest.approx(
            float(frame[frame["series"] == "w123"]["value"].iloc[-1])
        )
        assert outcome.new_points == 300 * 40
    finally:
        window.close()


def test_the_history_sent_to_the_planner_is_flat_arrays_of_the_same_frame(
    now: pd.Timestamp,
) -> None:
    levels = {f"w{i:03d}": 5.0 + i for i in range(50)}
    window = window_over(FrameSource(history(levels, now, 60)), levels, 40)
    try:
        window.update(now)
        picked = ["w007", "w003", "w042"]
        sent = window.history(picked)
        # No per-cell Python objects: pickling them would hold the interpreter lock per cell.
        assert [a.dtype.kind for a in (sent.lengths, sent.times, sent.values)] == ["i", "i", "f"]
        assert sent.names == tuple(picked)
        frame = pickle.loads(pickle.dumps(sent)).to_frame()
        assert list(frame["series"].unique()) == picked
        for name in picked:
            part = frame[frame["series"] == name]
            assert len(part) == 40
            assert part["timestamp"].iloc[-1] == window.last_data(name)
            assert part["value"].iloc[-1] == window.value_at(name, part["timestamp"].iloc[-1])
        pd.testing.assert_frame_equal(frame, window.frame(picked))
    finally:
        window.close()


def test_one_broken_query_does_not_hold_the_batch_back(now: pd.Timestamp) -> None:
    refresher, source, _ = build(now)
    source.broken = {"embed"}
    snapshot = refresher.tick(now.to_pydatetime())
    assert "no such metric: embed" in (snapshot.states["embed"].problem or "")
    assert snapshot.forecast("chat").desired_replicas >= 1
    with pytest.raises(ForecastUnavailableError):
        snapshot.forecast("embed")
    # The failed batch was retried workload by workload.
    calls = [sorted(names) for names, _, _ in source.calls]
    assert calls[0] == ["chat", "embed"]
    assert sorted(calls[1:3]) == [["chat"], ["embed"]]


def test_one_batched_plan_per_tick_for_all_workloads(now: pd.Timestamp) -> None:
    frame = history(LEVELS, now, 200)
    planner = CountingPlanner(fit_planner(frame, specs(LEVELS)))
    refresher, _, _ = build(now, planner)
    refresher.tick(now.to_pydatetime())
    planner.calls.clear()  # the first tick also validated the model on the data
    refresher.tick(now.to_pydatetime())
    assert planner.calls == []  # no new data, same model: nothing to plan
    later = now + pd.Timedelta(seconds=STEP)
    refresher.source_factory().extend(later, LEVELS)  # type: ignore[attr-defined]
    refresher.tick(later.to_pydatetime())
    assert planner.calls == [("chat", "embed")]


def test_source_error_keeps_last_forecast_until_max_staleness(now: pd.Timestamp) -> None:
    refresher, source, _ = build(now, max_staleness=60.0)
    good = refresher.tick(now.to_pydatetime()).forecast("chat")
    source.fail = "connection refused"
    snapshot = refresher.tick((now + pd.Timedelta(seconds=STEP)).to_pydatetime())
    assert "connection refused" in (snapshot.states["chat"].problem or "")
    # Still served while young enough...
    assert snapshot.forecast("chat", now.to_pydatetime()) == good
    # ...and refused, with the reason, once the data is older than max_staleness.
    late = good.origin + timedelta(seconds=61)
    with pytest.raises(ForecastUnavailableError, match=r"max_staleness 60 s.*connection refused"):
        snapshot.forecast("chat", late)
    assert not snapshot.status("chat", late).fresh


@pytest.mark.parametrize("result", ["nan", "raise"])
def test_failed_prediction_never_becomes_a_number(now: pd.Timestamp, result: str) -> None:
    frame = history(LEVELS, now, 200)
    planner = CountingPlanner(fit_planner(frame, specs(LEVELS)), result=result)
    refresher, _, registry = build(now)
    refresher.tick(now.to_pydatetime())
    # Swapping in a version that cannot plan is refused at validation...
    registry.add(planner)
    refresher.watcher.check()
    refresher.tick(now.to_pydatetime())
    assert refresher.watcher.current is not None
    assert refresher.watcher.current.version == "1"
    assert refresher.watcher.rejected
    # ...and a model that starts failing later leaves no forecast behind it.
    fresh_refresher, _, _ = build(now, planner)
    snapshot = fresh_refresher.tick(now.to_pydatetime())
    with pytest.raises(ForecastUnavailableError):
        snapshot.forecast("chat")


def test_a_config_that_left_the_registered_policy_is_refused_the_others_served(
    now: pd.Timestamp, caplog: pytest.LogCaptureFixture
) -> None:
    frame = history(LEVELS, now, 200)
    registered = specs(LEVELS, max_replicas=500, capacity_per_replica=0.5)
    planner = fit_planner(frame, registered)
    served = {**registered, "chat": specs(LEVELS, max_replicas=3, capacity_per_replica=0.5)["chat"]}
    refresher, _, _ = build(now, planner, workload_specs=served)
    with caplog.at_level(logging.WARNING, logger="serving.engine.refresher"):
        snapshot = refresher.tick(now.to_pydatetime())
    # Said as a drift, what a retrain mends: not as stale data.
    refused = [r for r in caplog.records if r.getMessage().startswith("workload not served")]
    assert [(r.getMessage(), getattr(r, "workload", None)) for r in refused] == [
        ("workload not served (drift): its metric answers 503 / UNAVAILABLE", "chat")
    ]
    # Neither the registered bound (500) nor the config's (3): no number at all.
    with pytest.raises(ForecastUnavailableError, match=r"max_replicas 500 -> 3 since version 1"):
        snapshot.forecast("chat")
    assert snapshot.states["chat"].drift == (
        "workload chat: max_replicas 500 -> 3 since version 1: retrain or revert"
    )
    assert (
        snapshot.forecast("embed").desired_replicas
        == planner.plan(frame).set_index("series").loc["embed", "desired_replicas"]
    )


def test_corrupt_new_version_keeps_the_old_one_serving(now: pd.Timestamp) -> None:
    refresher, _, registry = build(now)
    refresher.tick(now.to_pydatetime())
    registry.add(ModelLoadFailedError("artifact missing"))
    refresher.watcher.check()
    snapshot = refresher.tick(now.to_pydatetime())
    assert snapshot.model_version == "1"
    assert snapshot.forecast("chat").model_version == "1"
    assert "version 2 rejected" in (refresher.watcher.last_error or "")
    loads = registry.loads
    refresher.watcher.check()
    refresher.tick(now.to_pydatetime())
    assert registry.loads == loads  # a rejected version is not reloaded at every look-up


def test_good_new_version_is_swapped_in(now: pd.Timestamp) -> None:
    refresher, _, registry = build(now)
    refresher.tick(now.to_pydatetime())
    frame = history(LEVELS, now, 200)
    registry.add(fit_planner(frame, specs(LEVELS)))
    refresher.watcher.check()
    snapshot = refresher.tick(now.to_pydatetime())
    assert snapshot.model_version == "2"
    assert snapshot.forecast("embed").model_version == "2"


class ArrivalDuringValidation(CountingPlanner):
    """Plans for the first time (the validation of the new version) only once the clock has
    entered a later grid cell, whose point then arrives at the source."""

    source: FrameSource

    def plan(self, frame: pd.DataFrame) -> pd.DataFrame:
        if not self.calls:
            began = pd.Timestamp.now(tz="UTC").floor(f"{STEP}s")
            wait_until(lambda: pd.Timestamp.now(tz="UTC").floor(f"{STEP}s") > began, timeout=60)
            self.source.extend(pd.Timestamp.now(tz="UTC"), LEVELS)
        return super().plan(frame)


def test_a_tick_fetches_what_arrived_while_it_validated_a_new_version(now: pd.Timestamp) -> None:
    frame = history(LEVELS, now, 200)
    planner = ArrivalDuringValidation(fit_planner(frame, specs(LEVELS)))
    refresher, source, _ = build(now, planner)
    planner.source = source
    snapshot = refresher.tick()
    arrived = source.frame["timestamp"].max()
    assert arrived > now.floor(f"{STEP}s")
    assert snapshot.states["chat"].last_data == arrived


def test_file_sources_follow_their_files_while_serving(now: pd.Timestamp, tmp_path: Path) -> None:
    frame = history(LEVELS, now, 200)
    files = {name: tmp_path / f"{name}.csv" for name in LEVELS}

    def save(name: str, part: pd.DataFrame, mode: str = "w") -> None:
        part[["timestamp", "value"]].to_csv(files[name], index=False, mode=mode, header=mode == "w")

    save("chat", frame[frame["series"] == "chat"])  # embed's file is not there yet
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    config = refresh_config(LEVELS)
    store = SnapshotStore(empty_snapshot(config), Replies)
    watcher = ModelWatcher(registry, config.model_name)
    watcher.check()
    refresher = Refresher(config, lambda: FileSource(files=files), watcher, store)
    try:
        snapshot = refresher.tick(now.to_pydatetime())
        with pytest.raises(ForecastUnavailableError, match=r"embed\.csv' does not exist"):
            snapshot.forecast("embed", now.to_pydatetime())
        save("embed", frame[frame["series"] == "embed"])
        snapshot = refresher.tick(now.to_pydatetime())
        assert snapshot.forecast("embed", now.to_pydatetime()).desired_replicas >= 1
        # Rows appended to a file are read at the next refresh.
        later = now.floor(f"{STEP}s") + pd.Timedelta(seconds=3 * STEP)
        times = pd.date_range(now.floor(f"{STEP}s"), later, freq=f"{STEP}s")[1:]
        save("chat", pd.DataFrame({"timestamp": times, "value": 41.0}), mode="a")
        snapshot = refresher.tick(later.to_pydatetime())
        assert snapshot.states["chat"].last_data == later
    finally:
        refresher.close()


def test_unknown_workload_and_waiting_state(now: pd.Timestamp) -> None:
    refresher, _, _ = build(now)
    snapshot = refresher.store.current
    with pytest.raises(ForecastUnavailableError, match="waiting for the first refresh"):
        snapshot.forecast("chat")
    with pytest.raises(UnknownWorkloadError, match="unknown workload 'nope'"):
        snapshot.forecast("nope")


def test_planning_in_a_child_process_gives_the_same_forecasts(now: pd.Timestamp) -> None:
    here, source, _ = build(now)
    there, _, _ = build(now, plan_in_process=True)
    there.source_factory = lambda: source  # the same data for both
    try:
        for k in (0, 1):
            later = now + pd.Timedelta(seconds=k * STEP)
            if k:
                source.extend(later, {"chat": 80.0, "embed": 3.0})
            a = here.tick(later.to_pydatetime())
            b = there.tick(later.to_pydatetime())
            for name in LEVELS:
                fa, fb = a.forecast(name), b.forecast(name)
                assert (fa.desired_replicas, fa.forecast_demand, fa.origin) == (
                    fb.desired_replicas,
                    fb.forecast_demand,
                    fb.origin,
                )
        # The plan came from the child (set only once a child plan returned).
        assert there.planner is not None and there.planner._loaded is not None
    finally:
        here.close()
        there.close()


def test_a_source_outage_is_logged_once_per_error_not_per_workload_and_tick(
    now: pd.Timestamp, caplog: pytest.LogCaptureFixture
) -> None:
    refresher, source, _ = build(now, max_staleness=3600.0)
    refresher.tick(now.to_pydatetime())
    source.fail = "connection refused"
    with caplog.at_level(logging.WARNING, logger="serving.engine.refresher"):
        for k in range(1, 11):
            refresher.tick((now + pd.Timedelta(seconds=k * STEP)).to_pydatetime())
    lines = [r for r in caplog.records if r.getMessage() == "history fetch failed"]
    # Ten ticks failing every workload: one line, naming how many it failed.
    assert len(lines) == 1
    assert getattr(lines[0], "workloads") == len(LEVELS)  # noqa: B009
    assert "connection refused" in getattr(lines[0], "error")  # noqa: B009
    # The counter still counts every failed fetch.
    counted = refresher.metrics.source_errors.labels("chat")._value.get()  # type: ignore[union-attr]
    assert counted == 10


def test_plan_rows_are_the_plans_records_with_origins_made_per_row(now: pd.Timestamp) -> None:
    frame = history(LEVELS, now, 200)
    plan = fit_planner(frame, specs(LEVELS)).plan(frame)
    rows = list(_plan_rows(plan))
    records = plan.to_dict("records")
    assert len(rows) == len(records) == len(LEVELS)
    for row, record in zip(rows, records, strict=True):
        assert row.keys() == record.keys()
        assert row["origin"] == record["origin"] and row["origin"].tzinfo is not None
        assert {k: v for k, v in row.items() if k != "origin"} == pytest.approx(
            {k: v for k, v in record.items() if k != "origin"}, nan_ok=True
        )
    # An origin that is not a time takes the records' path, where its row fails alone.
    broken = plan.assign(origin=[pd.NaT, *plan["origin"].iloc[1:]])
    assert pd.isna(next(iter(_plan_rows(broken)))["origin"])


LOOP_SCRIPT = """
import asyncio, gc, sys
import pandas as pd
from serving.engine.refresher import freeze_long_lived
from tests.serving.test_refresher import build

refresher, _, _ = build(pd.Timestamp.now(tz="UTC"))
before = (gc.get_freeze_count(), sys.getswitchinterval())

async def one_tick():
    stop = asyncio.Event()
    task = asyncio.create_task(refresher.run(stop))
    while refresher.ticks == 0:
        await asyncio.sleep(0.01)
    during = sys.getswitchinterval()
    stop.set()
    await task
    return during

during = asyncio.run(one_tick())
refresher.close()
print(*before, during, sys.getswitchinterval(), gc.get_freeze_count() > 0, freeze_long_lived())
"""


def test_the_refresh_loop_tunes_the_interpreter_for_the_event_loop_beside_it() -> None:
    # In its own process: freezing is for the life of the process.
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", LOOP_SCRIPT], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # Nothing frozen and the default switch interval before; the loop's interval while it
    # runs and the default again after; frozen after the first tick, and only once.
    assert done.stdout.split() == ["0", "0.005", str(SWITCH_INTERVAL), "0.005", "True", "False"]
