"""Planning in chunks of workloads: the same plan as one call, in bounded memory."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from serving.engine import planner
from serving.engine.planner import plan_history
from serving.engine.window import History
from tests.serving.support import FrameSource, fit_planner, history, specs, window_over

# Not in name order: the chunks are, so their plans concatenate into one sorted plan.
LEVELS = {
    "zeta": 40.0,
    "alpha": 7.0,
    "mid": 12.0,
    "beta": 3.0,
    "omega": 25.0,
    "kappa": 9.0,
    "delta": 18.0,
}


class Recording:
    """Delegates to a real planner and records the workloads of each call."""

    def __init__(self, inner: Any, fail_on: str | None = None) -> None:
        self.inner = inner
        self.fail_on = fail_on
        self.calls: list[list[str]] = []

    def plan(self, frame: pd.DataFrame) -> pd.DataFrame:
        names = list(dict.fromkeys(frame["series"]))
        self.calls.append(names)
        if self.fail_on in names:
            raise RuntimeError(f"model exploded on {self.fail_on}")
        plan: pd.DataFrame = self.inner.plan(frame)
        return plan


@pytest.fixture()
def recent() -> tuple[Any, History]:
    """A real planner and the window's history of :data:`LEVELS`, in config order."""
    now = pd.Timestamp("2026-03-02T12:00:00Z")  # any time: the window is given it
    frame = history(LEVELS, now, 200)
    # A gap in one workload's recent data, another's last points not in yet (its history is
    # shorter): the chunks must cut each workload at its own bounds.
    gapped = frame.drop(frame.index[frame["series"] == "mid"][150:160])
    gapped = gapped.drop(gapped.index[gapped["series"] == "kappa"][-5:])
    window = window_over(FrameSource(gapped), LEVELS, 200)
    try:
        window.update(now)
        return fit_planner(frame, specs(LEVELS)), window.history(list(LEVELS))
    finally:
        window.close()


def test_chunked_plan_is_the_one_batch_plan(
    recent: tuple[Any, History], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, recent_history = recent
    whole = model.plan(recent_history.to_frame())
    monkeypatch.setattr(planner, "PLAN_CHUNK", 3)
    recording = Recording(model)
    chunked = plan_history(recording, recent_history)
    assert recording.calls == [["alpha", "beta", "delta"], ["kappa", "mid", "omega"], ["zeta"]]
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)


def test_up_to_a_chunk_is_planned_in_one_call_of_the_history_as_given(
    recent: tuple[Any, History], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, recent_history = recent
    monkeypatch.setattr(planner, "PLAN_CHUNK", len(LEVELS))
    recording = Recording(model)
    plan = plan_history(recording, recent_history)
    assert recording.calls == [list(LEVELS)]
    pd.testing.assert_frame_equal(plan, model.plan(recent_history.to_frame()), check_exact=True)


def test_a_failing_chunk_fails_the_plan(
    recent: tuple[Any, History], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, recent_history = recent
    monkeypatch.setattr(planner, "PLAN_CHUNK", 3)
    # The caller then plans workload by workload, as after a failed batch.
    with pytest.raises(RuntimeError, match="exploded on mid"):
        plan_history(Recording(model, fail_on="mid"), recent_history)


def test_history_chunks_hold_each_workload_s_rows_once_in_name_order(
    recent: tuple[Any, History],
) -> None:
    _, recent_history = recent
    parts = list(recent_history.chunks(3))
    assert [part.names for part in parts] == [
        ("alpha", "beta", "delta"),
        ("kappa", "mid", "omega"),
        ("zeta",),
    ]
    whole = recent_history.to_frame()
    ordered = whole.sort_values("series", kind="stable", ignore_index=True)
    rejoined = pd.concat([part.to_frame() for part in parts], ignore_index=True)
    pd.testing.assert_frame_equal(rejoined, ordered, check_exact=True)
    with pytest.raises(ValueError, match="at least one workload"):
        next(recent_history.chunks(0))
