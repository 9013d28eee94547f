"""Per-observation memo: what a policy derives from the history once, shared by its settings.

A sweep plans one policy at every setting of its grid on the same :class:`Observation`. The
peers' forecasts (an FFT period search, an ARIMA fit, a learned schedule) depend on the
history and on none of the swept knobs, so each is computed once per observation and reused.
Entries live as long as their observation: they are keyed by identity and dropped once the
observation is garbage.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from forecaster.policies.base import Observation

T = TypeVar("T")

_ENTRIES: dict[int, tuple[weakref.ref[Observation], dict[Hashable, Any]]] = {}


def memoized(obs: Observation, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, computed once per ``obs`` and ``key``.

    ``key`` must name everything ``compute`` depends on besides ``obs``.
    """
    entry = _ENTRIES.get(id(obs))
    if entry is None or entry[0]() is not obs:
        _drop_dead()
        entry = (weakref.ref(obs), {})
        _ENTRIES[id(obs)] = entry
    values = entry[1]
    if key not in values:
        values[key] = compute()
    result: T = values[key]
    return result


def _drop_dead() -> None:
    for ident in [i for i, (ref, _) in _ENTRIES.items() if ref() is None]:
        del _ENTRIES[ident]
