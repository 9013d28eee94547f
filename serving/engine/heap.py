"""Handing the memory a refresh freed back to the operating system.

A refresh of 10,000 workloads builds and drops a few hundred MiB of frames and arrays. glibc's
``malloc`` keeps much of what is freed for reuse rather than returning it, so the serving
process's resident memory rises to the refresh's high-water mark and stays there, and the
container's memory limit counts it. ``malloc_trim(0)`` returns every whole free page: after a
refresh of 10,000 workloads it takes the server process from 578-588 to 450-473 MiB at rest,
in 3 to 7 ms, with no change in the refresh's time (``benchmarks/serving_latency.py
--workloads 10000``, two runs each, when the plan was one batch). The peak, while the
planning child plans, fell little (about 20 MiB): the next refresh grows the heap again first;
planning in chunks (:data:`serving.engine.planner.PLAN_CHUNK`) is what bounds it. It runs in C
without the interpreter lock (ctypes releases it), so requests are answered meanwhile. The
planning child is not trimmed: what it frees is mostly large arrays, which ``malloc`` hands
back by itself.

On a C library without ``malloc_trim`` (musl, macOS) :func:`trim` does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["AVAILABLE", "trim"]


def _malloc_trim() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    try:
        function = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # no C library by that name, or no malloc_trim in it
        return None
    if function is not None:
        function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
    return function


_MALLOC_TRIM = _malloc_trim()
AVAILABLE = _MALLOC_TRIM is not None
"""Whether this C library has ``malloc_trim``."""


def trim() -> bool:
    """Return the heap's free pages to the operating system; True when any were returned
    (False too where the C library has no ``malloc_trim``)."""
    return bool(_MALLOC_TRIM(0)) if _MALLOC_TRIM is not None else False
