"""Which workloads a bounded ``prewarm train --tune`` run backtests, and what the rest keep.

A tune backtests each workload (about a minute on two CPUs, ``docs/training.md``), so a
fleet outgrows a nightly deadline long before its fit does. With a limit of ``k`` workloads
per run, the run tunes, in this order:

1. workloads the champion has no policy for (``new``);
2. workloads whose policy in the configuration has changed since the champion was tuned
   (``changed``: a field other than the tuned settings and the learned warm buffer, such
   as a capacity, a cold start, measured ``auto`` ones included, or the hold);
3. workloads whose registered settings no backtest has scored (``pending``: an earlier run
   left them past its limit, or the champion was trained without ``--tune``);
4. the rest (``due``), in a rotation that moves ``k`` places along the workloads' names each
   day of data, so each is tuned again about every ``n / k`` days.

Within a group the rotation orders them too. A workload not tuned keeps the champion's tuned
settings on its current policy (the very policy registered before, where nothing changed; a
new one keeps the configuration's settings, as ``train`` without ``--tune`` registers them),
and unless it was ``due`` it stays ``pending`` for the next run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from forecaster.exceptions import ConfigError
from forecaster.workload import LEARNED, TUNED, WorkloadPolicy

NEW, CHANGED, PENDING, DUE = "new", "changed", "pending", "due"
RANKS = (NEW, CHANGED, PENDING, DUE)


@dataclass(frozen=True)
class TuningRotation:
    """One run's split of the fleet.

    Attributes
    ----------
    tuned
        Workloads backtested and tuned this run, in the configuration's order.
    kept
        Every other workload -> the policy it keeps: the configuration's policy with the
        champion's tuned settings (a new workload's: the configuration's own).
    reasons
        Workload -> why it ranks where it does (:data:`RANKS`).
    """

    tuned: tuple[str, ...]
    kept: dict[str, WorkloadPolicy]
    reasons: dict[str, str]

    @property
    def pending(self) -> list[str]:
        """Workloads kept with settings no backtest has scored for their policy: the next
        run tunes them before the rotation."""
        return [name for name in self.kept if self.reasons[name] != DUE]


def why_tuned(policy: WorkloadPolicy, registered: WorkloadPolicy | None, pending: bool) -> str:
    """Where a workload ranks (:data:`RANKS`) given its champion's policy ``registered``,
    and whether that policy is ``pending``: ``changed`` when any field but the tuned and the
    learned ones differs (as serving's drift check compares them)."""
    if registered is None:
        return NEW
    if registered.differences(policy, ignore=(*TUNED, *LEARNED)):
        return CHANGED
    return PENDING if pending else DUE


def rotation(
    policies: Mapping[str, WorkloadPolicy],
    registered: Mapping[str, WorkloadPolicy],
    pending: Collection[str],
    limit: int | None,
    day: int,
) -> TuningRotation:
    """The workloads of ``policies`` to tune this run and the policies the others keep.

    Parameters
    ----------
    policies
        Each workload's policy in the configuration, in its order.
    registered
        The champion's registered policies (empty without a champion).
    pending
        The champion's workloads whose registered settings no backtest has scored.
    limit
        At most this many workloads are tuned; ``None`` tunes them all.
    day
        The run's day of data (the ordinal of its last timestamp's date): it turns the
        rotation, so a rerun on the same data against the same champion tunes the same
        workloads.

    Examples
    --------
    >>> from forecaster.workload import WorkloadSpec
    >>> policy = WorkloadPolicy(WorkloadSpec(capacity_per_replica=1.0))
    >>> fleet = {name: policy for name in "abcd"}
    >>> [rotation(fleet, fleet, (), 2, day).tuned for day in range(3)]
    [('a', 'b'), ('c', 'd'), ('a', 'b')]
    >>> rotation(fleet, fleet, {"d"}, 2, 0).tuned
    ('a', 'd')
    >>> rotation(fleet, {}, (), 3, 0).pending
    ['d']
    """
    if limit is not None and limit < 1:
        raise ConfigError(f"`limit` must be at least 1, got {limit!r}")
    reasons = {
        name: why_tuned(policy, registered.get(name), name in pending)
        for name, policy in policies.items()
    }
    names = sorted(policies)
    start = 0 if limit is None else day * limit
    place = {name: (i - start) % len(names) for i, name in enumerate(names)}
    ranked = sorted(names, key=lambda name: (RANKS.index(reasons[name]), place[name]))
    chosen = set(ranked if limit is None else ranked[:limit])
    kept = {
        name: policy if reasons[name] == NEW else policy.tuned(**registered[name].settings())
        for name, policy in policies.items()
        if name not in chosen
    }
    return TuningRotation(tuple(n for n in policies if n in chosen), kept, reasons)
