"""Planning in a child process, so that a refresh does not starve the request path.

Planning 1,000 workloads is about a second of pandas and numpy work that mostly holds the
interpreter lock. Run in a thread of the serving process, it competes with the event loop
for that lock, and every request that arrives meanwhile waits: the tail latency of the metric
endpoint then follows the refresh, not the request. In a child process the plan only
competes for a CPU core, which the operating system shares fairly.

The child keeps the model it was last sent, so a model crosses the process boundary once per
version; each tick sends the history as flat arrays (:class:`~serving.engine.window.History`)
and gets the plan (one row per workload) back, :data:`PLAN_CHUNK` workloads at a time, so that
neither process's memory grows with the number of workloads. If the child dies, the next plan
starts a new one; if that fails too, the caller plans in its own process
(:class:`~serving.engine.refresher.Refresher` does).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd

from serving.engine.window import History
from training.registry import LoadedModel, PlanningModel

__all__ = ["CHILD_NICENESS", "PLAN_CHUNK", "ProcessPlanner", "in_chunks", "plan_history"]

logger = logging.getLogger(__name__)

CHILD_NICENESS = 10
"""How much lower the planning child's scheduling priority is than the server's."""

PLAN_CHUNK = 1000
"""Most workloads one call of ``model.plan`` is given, and one message to the child carries.

A plan's transient memory follows the rows it is given: checking and sorting the long frame
copies it several times over, and the history sent to the child is pickled whole in the
server (about twice its 28 MiB at 10,000 workloads), then unpickled in the child. Planning
10,000 workloads in one call took the child from about 275 MiB to 510 MiB, and the server
with its child to a peak of 1,109 MiB, past a 1 GiB limit; in chunks of 1,000 the child
peaks about 20 MiB above its rest and the server with it at 775 to 784 MiB, the planning
child's CPU time per refresh unchanged (``benchmarks/serving_latency.py --workloads 10000``).
Each workload's plan reads only its own history, so the plans are the same.
"""

_MODELS: dict[tuple[str, str], Any] = {}
"""In the child: the model last sent, by (name, version)."""


def _lower_priority() -> None:
    # Planning has a whole refresh interval to finish; a request has milliseconds. When both
    # want a core, the scheduler should pick the request.
    os.nice(CHILD_NICENESS)


def plan_history(model: PlanningModel, history: History) -> pd.DataFrame:
    """``model.plan`` of ``history``, in this process, :data:`PLAN_CHUNK` workloads at a time
    (:func:`in_chunks`)."""
    return in_chunks(lambda part: model.plan(part.to_frame()), history)


def in_chunks(plan: Callable[[History], pd.DataFrame], history: History) -> pd.DataFrame:
    """``plan(history)`` in one call up to :data:`PLAN_CHUNK` workloads, else one call per
    chunk of them in name order, the plans concatenated (sorted by name, as one plan of them
    all is). Raises what the first failing call raised."""
    if len(history.names) <= PLAN_CHUNK:
        return plan(history)
    return pd.concat([plan(part) for part in history.chunks(PLAN_CHUNK)], ignore_index=True)


def _plan_in_child(key: tuple[str, str], model: Any, history: History) -> pd.DataFrame:
    if model is not None:
        _MODELS.clear()
        _MODELS[key] = model
    plan: pd.DataFrame = _MODELS[key].plan(history.to_frame())
    return plan


class ProcessPlanner:
    """Calls ``model.plan(frame)`` in one long-lived child process.

    The child is started with ``spawn`` (a fork of a process that runs gRPC and uvicorn
    threads could inherit held locks) on the first call, which therefore takes the child's
    start-up time once. It runs at a lower scheduling priority (:data:`CHILD_NICENESS`), so
    that on a busy node requests get the cores first. A daemonic process cannot start it
    (the caller then plans in its own process), and, as with any ``spawn`` child, the main
    script must guard its entry point with ``if __name__ == "__main__"``.
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._loaded: tuple[str, str, int] | None = None

    def plan(self, served: LoadedModel[PlanningModel], history: History) -> pd.DataFrame:
        """Plan ``history`` with ``served``'s model in the child process, one message per
        :data:`PLAN_CHUNK` workloads (:func:`in_chunks`).

        Raises
        ------
        Exception
            Whatever the model raised (re-raised here), or ``BrokenProcessPool`` when the
            child died twice in a row.
        """
        return in_chunks(lambda part: self._plan_part(served, part), history)

    def _plan_part(self, served: LoadedModel[PlanningModel], history: History) -> pd.DataFrame:
        for attempt in (1, 2):
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_lower_priority,
                )
                self._loaded = None
            key = (served.name, served.version, id(served.model))
            model = None if self._loaded == key else served.model
            try:
                plan = self._pool.submit(
                    _plan_in_child, (served.name, served.version), model, history
                ).result()
            except BrokenProcessPool:
                logger.warning("planning process died; starting a new one")
                self.close()
                if attempt == 2:
                    raise
                continue
            self._loaded = key
            return plan
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    def close(self) -> None:
        """Stop the child process."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._loaded = None
