"""The Kubernetes HorizontalPodAutoscaler's replica decision, tick by tick.

Follows ``pkg/controller/podautoscaler`` (``replica_calculator.go``, ``horizontal.go``) for
External metrics with an ``AverageValue`` target:

- per metric: ``ratio = usage / (target * current)``; inside the tolerance band
  (``1 - down <= ratio <= 1 + up``, both 0.1 by default) the proposal is ``current``,
  otherwise ``ceil(usage / target)``; with several metrics the largest proposal wins;
- stabilization: the recommendation is ``current`` pulled up to the lowest proposal of the
  scale-up window and down to the highest proposal of the scale-down window (300 s);
- rate limits: scale-up policies ``Percent 100`` and ``Pods 4`` per 15 s with
  ``selectPolicy: Max``, measured from the replica count at the start of each policy's
  period; scale-down ``Percent 100`` per 15 s; then ``[min, max]``.

A scale event or recommendation recorded ``period`` seconds ago is outside the period, as
the controller compares timestamps with a strict ``After``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

import numpy as np

from forecaster.exceptions import ConfigError

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]


class FleetMetric(Protocol):
    """A metric whose value depends on the replicas the controller itself asked for.

    A utilization is one: the same demand on fewer ready replicas reads higher. The
    controller calls it once per tick, in order, with the replica count the tick starts
    from (the previous tick's decision), before deciding the tick.
    """

    def __call__(self, tick: int, replicas: int) -> float:
        """The metric's value (sum over items) at ``tick``."""
        ...

    def __len__(self) -> int:
        """The number of ticks."""
        ...


@dataclass(frozen=True)
class ScalingPolicy:
    """One ``behavior.scaleUp/scaleDown.policies`` entry."""

    type: PolicyType
    value: int
    period_seconds: int

    def __post_init__(self) -> None:
        if self.type not in ("Pods", "Percent"):
            raise ConfigError(f"`type` must be Pods or Percent, got {self.type!r}")
        if self.value <= 0 or not 0 < self.period_seconds <= 1800:
            raise ConfigError(
                "`value` must be > 0 and `period_seconds` in (0, 1800], "
                f"got value={self.value!r}, period_seconds={self.period_seconds!r}"
            )


@dataclass(frozen=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``.

    ``tolerance`` is the per-HPA ``behavior.scaleUp/scaleDown.tolerance`` (feature gate
    ``HPAConfigurableTolerance``, beta and on by default from Kubernetes 1.35); ``None``
    leaves the controller-wide ``--horizontal-pod-autoscaler-tolerance``.
    """

    stabilization_window_seconds: int
    policies: tuple[ScalingPolicy, ...]
    select_policy: SelectPolicy = "Max"
    tolerance: float | None = None

    def __post_init__(self) -> None:
        if self.select_policy not in ("Max", "Min", "Disabled"):
            raise ConfigError(
                f"`select_policy` must be Max, Min or Disabled, got {self.select_policy!r}"
            )
        if not 0 <= self.stabilization_window_seconds <= 3600:
            raise ConfigError(
                "`stabilization_window_seconds` must be in [0, 3600], "
                f"got {self.stabilization_window_seconds!r}"
            )
        if self.tolerance is not None and not 0 <= self.tolerance < 1:
            raise ConfigError(f"`tolerance` must be in [0, 1), got {self.tolerance!r}")


DEFAULT_SCALE_UP = ScalingRules(
    0, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)), "Max"
)
DEFAULT_SCALE_DOWN = ScalingRules(300, (ScalingPolicy("Percent", 100, 15),), "Max")


@dataclass(frozen=True)
class HPABehavior:
    """Controller settings: behavior, tolerance and sync period (Kubernetes defaults).

    ``tolerance`` is the controller-wide flag; a direction's own ``ScalingRules.tolerance``
    overrides it for that direction.
    """

    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN
    tolerance: float = 0.1
    sync_period_seconds: float = 15.0

    def __post_init__(self) -> None:
        if not 0 <= self.tolerance < 1:
            raise ConfigError(f"`tolerance` must be in [0, 1), got {self.tolerance!r}")
        if self.sync_period_seconds <= 0:
            raise ConfigError(
                f"`sync_period_seconds` must be > 0, got {self.sync_period_seconds!r}"
            )

    def with_tolerance(self, tolerance: float | None) -> HPABehavior:
        """This behavior with ``behavior.scaleUp/scaleDown.tolerance`` set to ``tolerance``.

        ``None`` returns it unchanged (the controller-wide tolerance applies).
        """
        if tolerance is None:
            return self
        return replace(
            self,
            scale_up=replace(self.scale_up, tolerance=tolerance),
            scale_down=replace(self.scale_down, tolerance=tolerance),
        )

    @property
    def up_tolerance(self) -> float:
        """Tolerance above a usage ratio of 1 (scale-up)."""
        own = self.scale_up.tolerance
        return self.tolerance if own is None else own

    @property
    def down_tolerance(self) -> float:
        """Tolerance below a usage ratio of 1 (scale-down)."""
        own = self.scale_down.tolerance
        return self.tolerance if own is None else own


@dataclass
class _Events:
    """Scale events of one direction: (tick, replica change)."""

    horizon_ticks: int
    items: deque[tuple[int, int]] = field(default_factory=deque)

    def change_within(self, tick: int, period_ticks: float) -> int:
        return sum(change for at, change in self.items if at > tick - period_ticks)

    def record(self, tick: int, change: int) -> None:
        self.items.append((tick, change))
        while self.items and self.items[0][0] <= tick - self.horizon_ticks:
            self.items.popleft()


def _last(history: deque[int], count: int) -> list[int]:
    """The ``count`` most recent entries (the deque holds at least that many)."""
    return list(history)[len(history) - count :]


def _window_ticks(seconds: float, sync: float) -> int:
    """How many past recommendations fall strictly inside a window of ``seconds``."""
    return max(0, math.ceil(seconds / sync) - 1)


class HPAController:
    """Replays the HPA over precomputed metric series.

    Parameters
    ----------
    behavior
        Behavior, tolerance and sync period.
    min_replicas, max_replicas
        The HPA's bounds.

    Examples
    --------
    >>> hpa = HPAController(HPABehavior(), min_replicas=1, max_replicas=50)
    >>> hpa.run([np.array([100.0, 1000.0, 1000.0])], [10.0], initial_replicas=10).tolist()
    [10, 20, 40]
    """

    def __init__(self, behavior: HPABehavior, min_replicas: int, max_replicas: int) -> None:
        self.behavior = behavior
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas

    def run(
        self,
        usages: Sequence[np.ndarray | FleetMetric],
        targets: Sequence[float],
        initial_replicas: int,
    ) -> np.ndarray:
        """Replica count after each sync tick.

        Parameters
        ----------
        usages
            One per metric: an array of the metric's value (sum over items) at each tick,
            or a :class:`FleetMetric` read tick by tick.
        targets
            ``averageValue`` target of each metric.
        initial_replicas
            Replicas before the first tick; it also fills the stabilization history, as a
            controller that has been running steadily would have.
        """
        if any(t <= 0 for t in targets):
            raise ConfigError(f"`targets` must be > 0, got {list(targets)!r}")
        behavior = self.behavior
        sync = behavior.sync_period_seconds
        up_window = _window_ticks(behavior.scale_up.stabilization_window_seconds, sync)
        down_window = _window_ticks(behavior.scale_down.stabilization_window_seconds, sync)
        horizon = max(
            [p.period_seconds for p in behavior.scale_up.policies + behavior.scale_down.policies],
            default=0,
        )
        events = {
            1: _Events(math.ceil(horizon / sync)),
            -1: _Events(math.ceil(horizon / sync)),
        }
        window = max(up_window, down_window)
        history: deque[int] = deque([initial_replicas] * window, maxlen=window)
        # Plain floats and an inlined proposal: this loop runs once per 15 s tick. A fleet
        # metric's column is filled as the ticks go.
        columns: list[tuple[list[float], float]] = [
            (u.tolist() if isinstance(u, np.ndarray) else [], float(t))
            for u, t in zip(usages, targets, strict=True)
        ]
        fleet = [
            (metric, columns[i][0])
            for i, metric in enumerate(usages)
            if not isinstance(metric, np.ndarray)
        ]
        n_ticks = len(usages[0]) if usages else 0
        # the band is [1 - down, 1 + up] on the usage ratio (Tolerances.isWithin)
        low = 1.0 - behavior.down_tolerance
        high = 1.0 + behavior.up_tolerance
        current = initial_replicas
        out = np.empty(n_ticks, dtype=int)
        for tick in range(n_ticks):
            for metric, column in fleet:
                column.append(metric(tick, current))
            if not self.min_replicas <= current <= self.max_replicas:
                # the controller moves an out-of-range target into range before any metric
                new = min(max(current, self.min_replicas), self.max_replicas)
                events[1 if new > current else -1].record(tick, abs(new - current))
                current = out[tick] = new
                continue
            proposed = 0
            for values, target in columns:
                usage = values[tick]
                raw = math.ceil(usage / target)
                if current > 0 and low <= usage / (target * current) <= high:
                    raw = current
                if raw > proposed:
                    proposed = raw
            recommended = current
            if current < proposed:
                recommended = min(proposed, *_last(history, up_window)) if up_window else proposed
                recommended = max(recommended, current)
            elif current > proposed:
                highest = max(proposed, *_last(history, down_window)) if down_window else proposed
                recommended = min(current, highest)
            if window:
                history.append(proposed)
            if recommended != current:
                new = self._limit_rate(recommended, current, tick, events)
                if new != current:
                    events[1 if new > current else -1].record(tick, abs(new - current))
                    current = new
            out[tick] = current
        return out

    def _limit_rate(self, desired: int, current: int, tick: int, events: dict[int, _Events]) -> int:
        if desired > current:
            limit = max(self._limit(self.behavior.scale_up, current, tick, events, 1), current)
            return min(desired, limit, self.max_replicas)
        if desired < current:
            limit = min(self._limit(self.behavior.scale_down, current, tick, events, -1), current)
            return max(desired, limit, self.min_replicas)
        return desired

    def _limit(
        self, rules: ScalingRules, current: int, tick: int, events: dict[int, _Events], sign: int
    ) -> int:
        if rules.select_policy == "Disabled":
            return current
        sync = self.behavior.sync_period_seconds
        proposals = []
        for policy in rules.policies:
            period = policy.period_seconds / sync
            start = current - events[1].change_within(tick, period)
            start += events[-1].change_within(tick, period)
            if policy.type == "Pods":
                proposals.append(start + sign * policy.value)
            elif sign > 0:
                # rounded up so that a small deployment can always grow by one
                proposals.append(math.ceil(start * (1 + policy.value / 100)))
            else:
                proposals.append(int(start * (1 - policy.value / 100)))
        # "Max" selects the largest change: the highest limit up, the lowest limit down.
        largest_change = (rules.select_policy == "Max") == (sign > 0)
        return max(proposals) if largest_change else min(proposals)
