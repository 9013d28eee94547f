"""The model watcher: what it serves as the registry alias moves, fails and recovers.

The registry is the in-memory one of ``support``; the look-ups the watcher's thread makes
are made here by calling ``check`` directly, so each test says when the registry is read.
"""

from __future__ import annotations

import pandas as pd
import pytest
from prometheus_client import generate_latest

from serving.api.runtime import Runtime, ServingComponents
from serving.engine.models import ModelWatcher
from serving.settings import ServingSettings
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    fit_planner,
    history,
    refresh_config,
    specs,
)
from training.registry import LoadedModel, PlanningModel

LEVELS = {"chat": 40.0}


@pytest.fixture(scope="module")
def planner() -> object:
    frame = history(LEVELS, pd.Timestamp("2025-05-01T06:00:00Z"), 200)
    return fit_planner(frame, specs(LEVELS))


def accept(candidate: LoadedModel[PlanningModel]) -> None:
    """A validation every version passes."""


class FlakyLookups(DictRegistry):
    """Fails the next ``failing`` alias look-ups the way an unreachable server does."""

    failing = 0

    def champion_version(self, name: str) -> str | None:
        if self.failing:
            self.failing -= 1
            raise ConnectionError("http://mlflow.internal:5000: connection refused")
        return super().champion_version(name)


def test_a_lookup_failure_is_over_once_the_alias_answers_again(planner: object) -> None:
    registry = FlakyLookups("m")
    registry.add(planner)
    watcher = ModelWatcher(registry, "m")
    watcher.check()
    assert watcher.adopt(accept) is not None and watcher.last_error is None
    registry.failing = 1
    watcher.check()
    assert "registry lookup of 'm' failed" in (watcher.last_error or "")
    watcher.check()
    # The alias names the served version again: nothing is wrong any more.
    assert watcher.last_error is None
    assert watcher.current is not None and watcher.current.version == "1"


def test_a_version_the_alias_left_before_it_was_adopted_is_not_served(planner: object) -> None:
    registry = DictRegistry("m")
    registry.add(planner)
    watcher = ModelWatcher(registry, "m")
    watcher.check()
    watcher.adopt(accept)
    registry.add(planner)
    watcher.check()  # version 2 loaded, waiting for the refresher...
    registry.champion = "1"
    watcher.check()  # ...when the alias is moved back
    served = watcher.adopt(accept)
    assert served is not None and served.version == "1"
    assert watcher.reloads == 1


def test_a_waiting_version_is_loaded_once(planner: object) -> None:
    registry = DictRegistry("m")
    registry.add(planner)
    watcher = ModelWatcher(registry, "m")
    for _ in range(3):  # look-ups before the refresher adopts it
        watcher.check()
    assert registry.loads == 1
    served = watcher.adopt(accept)
    watcher.check()
    assert served is not None and served.version == "1" and registry.loads == 1


class Clock:
    """Monotonic seconds that move only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FailingLoads(DictRegistry):
    """Fails to load the next ``failing`` times, the way an unreachable artifact store does."""

    failing = 0

    def load(self, name: str, version: str) -> LoadedModel[PlanningModel]:
        if self.failing:
            self.failing -= 1
            self.loads += 1
            raise ConnectionError("artifact store unreachable")
        return super().load(name, version)


def polled(watcher: ModelWatcher, clock: Clock, until: float, every: float) -> None:
    """Look up every ``every`` seconds until ``until``, as the watcher's thread does."""
    while clock.now + every <= until:
        clock.now += every
        watcher.check()


def test_a_version_that_failed_to_load_is_tried_again_after_a_backoff(planner: object) -> None:
    clock = Clock()
    registry = FailingLoads("m")
    registry.add(planner)
    registry.failing = 2
    watcher = ModelWatcher(registry, "m", poll_interval=60.0, clock=clock)
    watcher.check()  # t=0: refused, tried again 60 s later
    assert watcher.adopt(accept) is None
    assert watcher.rejected_versions() == ["1"]
    assert "version 1 rejected: ConnectionError: artifact store unreachable" in (
        watcher.last_error or ""
    )
    clock.now = 59.0
    watcher.check()
    assert registry.loads == 1  # not before the delay
    clock.now = 60.0
    watcher.check()  # t=60: refused again, the delay doubles to 120 s
    assert registry.loads == 2 and watcher.rejected_versions() == ["1"]
    polled(watcher, clock, until=179.0, every=1.0)
    assert registry.loads == 2
    clock.now = 180.0
    watcher.check()  # t=180: it loads
    served = watcher.adopt(accept)
    assert served is not None and served.version == "1"
    assert watcher.rejected_versions() == [] and watcher.last_error is None
    # One version refused, however many of its tries failed; one loaded.
    assert (watcher.failures, watcher.reloads) == (1, 1)


def test_a_version_refused_on_bad_data_is_served_once_it_plans(planner: object) -> None:
    clock = Clock()
    registry = DictRegistry("m")
    registry.add(planner)
    watcher = ModelWatcher(registry, "m", poll_interval=60.0, clock=clock)
    bad_data = [True]

    def validate(candidate: LoadedModel[PlanningModel]) -> None:
        if bad_data[0]:
            raise ValueError("negative demand at rows 3")

    watcher.check()
    assert watcher.adopt(validate) is None
    assert watcher.rejected_versions() == ["1"]
    bad_data[0] = False  # the bad points slid out of the window
    polled(watcher, clock, until=60.0, every=15.0)
    served = watcher.adopt(validate)
    assert served is not None and served.version == "1"
    assert watcher.rejected_versions() == []


def test_the_delay_between_tries_doubles_up_to_the_cap(planner: object) -> None:
    clock = Clock()
    registry = FailingLoads("m")
    registry.add(planner)
    registry.failing = 10**6  # broken for good
    watcher = ModelWatcher(registry, "m", poll_interval=60.0, retry_cap=300.0, clock=clock)
    tried = []
    watcher.check()
    tried.append(clock.now)
    while clock.now < 1400.0:
        clock.now += 60.0
        loads = registry.loads
        watcher.check()
        if registry.loads > loads:
            tried.append(clock.now)
    # Delays of 60, 120, 240, then 300 s (the cap) for good.
    assert tried == [0.0, 60.0, 180.0, 420.0, 720.0, 1020.0, 1320.0]
    assert watcher.failures == 1


def test_metrics_count_a_refused_version_when_it_is_refused(planner: object) -> None:
    # /readyz lists a refused version as soon as the watcher's thread refuses it; the counter
    # says the same at that moment, not a refresh later.
    registry = FailingLoads("prewarm-test")
    registry.add(planner)
    registry.failing = 1
    source = FrameSource(history(LEVELS, pd.Timestamp("2025-05-01T06:00:00Z"), 10))
    components = ServingComponents(refresh_config(LEVELS), lambda: source, registry)
    runtime = Runtime.build(ServingSettings(grpc_port=None), components)
    runtime.watcher.check()
    exported = generate_latest(runtime.metrics.registry).decode()
    assert runtime.watcher.rejected_versions() == ["1"]
    assert 'prewarm_model_reloads_total{result="rejected"} 1.0' in exported
    assert 'prewarm_model_reloads_total{result="loaded"} 0.0' in exported
