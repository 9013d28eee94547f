"""How a benchmark reports its runs as they finish: one line each on stderr.

The long benchmarks run for half an hour to an hour and a half, often under ``nohup`` or in
CI, where a live progress bar draws nothing: a line per finished run, with the time since the
start, shows how far along one is (stdout stays for the results).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, as_completed
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def elapsed(seconds: float) -> str:
    """``[h:mm:ss]``.

    >>> elapsed(3725.2)
    '[1:02:05]'
    """
    minutes, second = divmod(int(seconds), 60)
    hour, minute = divmod(minutes, 60)
    return f"[{hour}:{minute:02d}:{second:02d}]"


def announce(text: str, started: float) -> None:
    """Print ``text`` on stderr after the time since ``started`` (``time.perf_counter``)."""
    print(f"{elapsed(time.perf_counter() - started)} {text}", file=sys.stderr, flush=True)


def finished(
    futures: Mapping[K, Future[V]], describe: Callable[[K, V], str] = lambda key, _: str(key)
) -> dict[K, V]:
    """Every future's result, in ``futures``' order, reporting each as it finishes
    (``describe(key, result)`` names it); the first run that raised raises here."""
    started = time.perf_counter()
    keys = {future: key for key, future in futures.items()}
    results: dict[K, V] = {}
    for done, future in enumerate(as_completed(keys), start=1):
        key = keys[future]
        results[key] = future.result()
        announce(f"{done}/{len(futures)} done: {describe(key, results[key])}", started)
    return {key: results[key] for key in futures}
