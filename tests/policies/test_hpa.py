"""The HPA emulation against documented controller decisions (table-driven)."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.exceptions import ConfigError
from forecaster.policies.hpa import (
    DEFAULT_SCALE_UP,
    HPABehavior,
    HPAController,
    ScalingPolicy,
    ScalingRules,
)

NO_DOWN_WINDOW = ScalingRules(0, (ScalingPolicy("Percent", 100, 15),))


def run(
    usage: list[float], current: int, behavior: HPABehavior | None = None, **bounds: int
) -> list[int]:
    controller = HPAController(
        behavior or HPABehavior(), bounds.get("min_replicas", 1), bounds.get("max_replicas", 200)
    )
    return controller.run([np.array(usage, dtype=float)], [10.0], current).tolist()


@pytest.mark.parametrize(
    ("usage", "current", "expected"),
    [
        pytest.param([109.0], 10, [10], id="ratio-1.09-inside-band-holds"),
        # Tolerances.isWithin (Kubernetes 1.33+): 110 / 100 <= 1.0 + 0.1 holds in float64,
        # both sides are the double nearest 1.1, so the edge is inside the band. (The older
        # |1 - ratio| <= 0.1 form put it outside: |1 - 1.1| is 0.10000000000000009.)
        pytest.param([110.0], 10, [10], id="ratio-1.10-edge-inside-band-holds"),
        pytest.param([90.0], 10, [10], id="ratio-0.90-edge-inside-band-holds"),
        pytest.param([111.0], 10, [12], id="ratio-1.11-scales-to-ceil-usage-over-target"),
        pytest.param([91.0], 10, [10], id="ratio-0.91-inside-band-holds"),
        pytest.param([0.0], 0, [1], id="zero-replicas-scale-to-min"),
    ],
)
def test_tolerance_band(usage: list[float], current: int, expected: list[int]) -> None:
    assert run(usage, current) == expected


@pytest.mark.parametrize(
    ("up", "down", "usage", "expected"),
    [
        # behavior.scaleUp.tolerance 0: any ratio above 1 scales up
        pytest.param(0.0, None, [101.0], [11], id="up-0-scales-on-1-percent"),
        pytest.param(0.0, None, [91.0], [10], id="up-0-keeps-the-default-down-band"),
        # behavior.scaleDown.tolerance 0: any ratio below 1 scales down
        pytest.param(None, 0.0, [99.0], [10], id="down-0-ceil-keeps-10"),
        pytest.param(None, 0.0, [89.0, 81.0], [9, 9], id="down-0-follows-ceil"),
        pytest.param(None, 0.0, [109.0], [10], id="down-0-keeps-the-default-up-band"),
        # 104 / 100 inside +5 %, 106 / 100 outside; then 90 / 110 = 0.82 inside -20 %
        pytest.param(0.05, 0.2, [104.0, 106.0, 90.0], [10, 11, 11], id="asymmetric"),
    ],
)
def test_per_direction_tolerance(
    up: float | None, down: float | None, usage: list[float], expected: list[int]
) -> None:
    behavior = HPABehavior(
        scale_up=ScalingRules(0, DEFAULT_SCALE_UP.policies, tolerance=up),
        scale_down=ScalingRules(0, NO_DOWN_WINDOW.policies, tolerance=down),
    )
    assert run(usage, 10, behavior) == expected


def test_desired_does_not_depend_on_current_outside_the_band() -> None:
    # AverageValue: ceil(usage / target), whatever the current count (within rate limits)
    assert run([250.0], 15) == run([250.0], 22) == [25]


@pytest.mark.parametrize(
    ("usage", "current", "expected"),
    [
        pytest.param([1000.0] * 5, 2, [6, 12, 24, 48, 96], id="pods-4-wins-below-4-replicas"),
        pytest.param([1000.0] * 3, 10, [20, 40, 80], id="percent-100-wins-above-4-replicas"),
        pytest.param([1000.0] * 3, 4, [8, 16, 32], id="tie-at-4-replicas"),
        pytest.param([5000.0] * 6, 30, [60, 120, 200, 200, 200, 200], id="capped-at-max"),
    ],
)
def test_default_scale_up_limit(usage: list[float], current: int, expected: list[int]) -> None:
    assert run(usage, current) == expected


def test_scale_down_waits_for_the_300s_stabilization_window() -> None:
    # A low recommendation every 15 s from t=0: the window (t-300, t] holds only low ones at
    # t=285 s, the 20th tick; before it the highest recommendation (10) is kept.
    result = run([50.0] * 25, 10)
    assert result == [10] * 19 + [5] * 6


def test_scale_down_goes_to_the_highest_recommendation_in_the_window() -> None:
    usage = [100.0] + [80.0] * 5 + [50.0] * 30
    result = run(usage, 10)
    # the 10 at t=0 leaves the window at t=300 (tick 20); the 8s at ticks 1..5 leave it
    # at ticks 21..25, after which only 5s remain.
    assert result[:20] == [10] * 20
    assert result[20:25] == [8] * 5
    assert result[25:] == [5] * 11


def test_scale_up_is_not_stabilized_by_default() -> None:
    assert run([50.0, 50.0, 100.0], 5) == [5, 5, 10]


def test_min_replicas_bounds_scale_down() -> None:
    behavior = HPABehavior(scale_down=NO_DOWN_WINDOW)
    assert run([0.0, 0.0], 10, behavior, min_replicas=3) == [3, 3]


def test_documented_scale_down_policy_example() -> None:
    # Kubernetes docs: Pods 4 / 60 s and Percent 10 / 60 s, Max selects the larger change;
    # from 80 replicas toward 10, the first step removes 8, the next (72 -> int(64.8)) 8,
    # each once per 60 s period.
    rules = ScalingRules(0, (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)), "Max")
    result = run([100.0] * 9, 80, HPABehavior(scale_down=rules))
    assert result == [72, 72, 72, 72, 64, 64, 64, 64, 57]


def test_select_policy_min_takes_the_smaller_scale_up() -> None:
    up = ScalingRules(0, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)), "Min")
    assert run([1000.0] * 2, 10, HPABehavior(scale_up=up)) == [14, 18]


def test_disabled_scale_down_never_removes() -> None:
    down = ScalingRules(0, (ScalingPolicy("Percent", 100, 15),), "Disabled")
    assert run([10.0] * 3, 10, HPABehavior(scale_down=down)) == [10, 10, 10]


def test_scale_up_stabilization_takes_the_lowest_recent_recommendation() -> None:
    up = ScalingRules(30, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)))
    # window (t-30, t] holds this tick and the previous one
    assert run([100.0, 200.0, 200.0, 300.0, 300.0], 10, HPABehavior(scale_up=up)) == [
        10,
        10,
        20,
        20,
        30,
    ]


def test_two_metrics_take_the_larger_proposal() -> None:
    controller = HPAController(HPABehavior(), 1, 100)
    result = controller.run([np.array([100.0]), np.array([300.0])], [10.0, 10.0], 20)
    assert result.tolist() == [30]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tolerance": 1.5}, "tolerance"),
        ({"sync_period_seconds": 0}, "sync_period_seconds"),
    ],
    ids=["tolerance", "sync"],
)
def test_behavior_validation(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        HPABehavior(**kwargs)  # type: ignore[arg-type]


def test_policy_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="period_seconds"):
        ScalingPolicy("Pods", 4, 3600)
