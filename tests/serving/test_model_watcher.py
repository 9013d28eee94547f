"""The model watcher: what it serves as the registry alias moves, fails and recovers.

The registry is the in-memory one of ``support``; the look-ups the watcher's thread makes
are made here by calling ``check`` directly, so each test says when the registry is read.
"""

from __future__ import annotations

import pandas as pd
import pytest

from serving.engine.models import ModelWatcher
from tests.serving.support import DictRegistry, fit_planner, history, specs
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
