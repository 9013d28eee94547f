"""The compute a run uses: the CPUs of its own process (:func:`usable_cpus`), and the Dask
cluster that per-workload backtests run on: a client connected to an existing scheduler by its
address, and pure :mod:`forecaster` calls mapped to its workers.

Only the calls go to the workers; their results come back to the calling process, which
writes the reports and logs to MLflow. Without an address the calls run on this machine: in
order, or on a worker process per usable CPU when there are enough of them (:func:`map_calls`).
``dask[distributed]`` is an optional dependency (``pip install 'prewarm[dask]'``), imported
only when an address is given. See ``docs/scale.md``.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from logging.handlers import QueueHandler, QueueListener
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from forecaster.exceptions import ConfigError, shown
from training.exceptions import SourceError

if TYPE_CHECKING:
    from distributed import Client

R = TypeVar("R")

SCHEMES = ("tcp", "tls")
CONNECT_TIMEOUT = 10.0  # seconds; dask retries a refused connection until then
WORKERS_TIMEOUT = 120.0  # seconds for a first worker to join: pods of a new cluster starting
# Where a container's CPU limit shows: cgroup v2's one file, v1's quota and period.
CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (
    Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
    Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def usable_cpus(v2: Path = CGROUP_V2, v1: tuple[Path, Path] = CGROUP_V1) -> int:
    """The CPUs this process may use: those it may run on, fewer where its cgroup's CPU
    quota allows fewer (a Kubernetes CPU limit, which the node's CPU count does not show;
    a limit of 1.5 gives 2). At least 1.
    """
    cpus = len(os.sched_getaffinity(0))
    quota = _cgroup_quota(v2, v1)
    return max(1, min(cpus, math.ceil(quota)) if quota is not None else cpus)


def _cgroup_quota(v2: Path, v1: tuple[Path, Path]) -> float | None:
    """CPUs' worth of time the cgroup may use per period, or None without a quota."""
    try:
        if v2.is_file():
            quota, period = v2.read_text().split()[:2]
        elif v1[0].is_file():
            quota, period = v1[0].read_text().strip(), v1[1].read_text().strip()
        else:
            return None
        if quota in ("max", "-1"):
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):  # unreadable or not as documented: no quota known
        return None


class ComputeError(SourceError):
    """The Dask cluster cannot be reached, or lost the work: like a source that fails, a
    service outside the run, so it exits as a source failure does (code 3)."""


def scheduler_address(address: str) -> str:
    """``address`` if it is ``tcp://HOST:PORT`` or ``tls://HOST:PORT``.

    Raises
    ------
    ConfigError
        Naming the address otherwise.

    Examples
    --------
    >>> scheduler_address("tcp://dask-scheduler:8786")
    'tcp://dask-scheduler:8786'
    """
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        port = None
    if (
        port is None
        or parts.scheme not in SCHEMES
        or not parts.hostname
        or parts.path not in ("", "/")
        or parts.query
    ):
        raise ConfigError(
            f"a Dask scheduler address is tcp://HOST:PORT or tls://HOST:PORT, got {shown(address)}"
        )
    return address


@contextmanager
def dask_client(
    address: str | None,
    timeout: float = CONNECT_TIMEOUT,
    workers_timeout: float = WORKERS_TIMEOUT,
) -> Iterator[Client | None]:
    """A client of the Dask scheduler at ``address``, closed on exit; ``None`` without one.

    The scheduler must answer within ``timeout`` seconds and have a worker within
    ``workers_timeout``; its workers must run the same prewarm version as this process
    (a worker that cannot unpickle a call would leave it waiting forever).

    A ``tls://`` scheduler takes its certificates from dask's own configuration
    (``distributed.comm.tls``, or the ``DASK_DISTRIBUTED__COMM__TLS__*`` variables).

    Raises
    ------
    ConfigError
        When the address is malformed, or dask is not installed.
    ComputeError
        When the scheduler does not answer, has no worker, or its workers run another
        prewarm (or none).
    """
    if address is None:
        yield None
        return
    scheduler_address(address)
    try:
        from distributed import Client
    except ImportError as exc:
        raise ConfigError(
            "a Dask scheduler needs dask[distributed]: pip install 'prewarm[dask]'"
        ) from exc
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ComputeError(
            f"the Dask scheduler {shown(address)} did not answer within {timeout:g} s "
            "(check the address, and that the scheduler runs and is reachable from here)"
        ) from exc
    try:
        _check_workers(client, address, workers_timeout)
        yield client
    finally:
        client.close()


def _check_workers(client: Client, address: str, timeout: float) -> None:
    """Raise :class:`ComputeError` unless a worker of the scheduler at ``address`` joins
    within ``timeout`` seconds and every worker has this process's prewarm version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError as exc:
        raise ComputeError(
            f"the Dask scheduler {shown(address)} has no worker after {timeout:g} s"
        ) from exc
    here = version("prewarm")
    try:
        there = client.run(version, "prewarm")
    except PackageNotFoundError as exc:
        raise ComputeError(
            "the Dask workers do not have prewarm installed: run them from the prewarm image"
        ) from exc
    other = sorted({v for v in there.values() if v != here})
    if other:
        raise ComputeError(
            f"the Dask workers run prewarm {other[:3]}, this process {here}: run them from "
            "the same image"
        )


LOCAL_POOL_MIN_CALLS = 8
"""Fewest calls run on local worker processes by default: starting one (a fresh interpreter
importing prewarm, about 2 s) costs more than a handful of small calls, such as the gate's
sweeps of one workload each."""


def map_calls(
    function: Callable[..., R],
    calls: Mapping[str, Sequence[Any]],
    client: Client | None,
    min_local_calls: int = LOCAL_POOL_MIN_CALLS,
) -> Iterator[tuple[str, R]]:
    """Each ``function(*calls[name])`` with its ``name``: on the cluster's workers with a
    client, else on this machine: in order here when there are fewer than
    ``min_local_calls`` calls or one usable CPU, otherwise on a worker process per usable CPU
    (:func:`usable_cpus`: the CronJob's CPU limit). Off this process, results are yielded as
    they complete.

    ``function`` must be pure and importable on the workers (a module-level
    :mod:`forecaster` function): the cluster, or the local processes, run it on pickled
    arguments. The local processes' log records are handled here, as this process's own.

    Raises
    ------
    ComputeError
        When the cluster loses a call (a worker dies, the scheduler goes away), or a local
        worker process dies (killed for memory, say).
    """
    if client is None:
        workers = min(usable_cpus(), len(calls)) if len(calls) >= min_local_calls else 1
        if workers > 1:
            yield from _in_processes(function, calls, workers)
            return
        for name, args in calls.items():
            yield name, function(*args)
        return
    from distributed import as_completed

    # pure=False: two workloads with identical inputs are still two calls, two results.
    futures = {client.submit(function, *args, pure=False): name for name, args in calls.items()}
    for future in as_completed(futures, loop=client.loop):
        name = futures[future]
        yield name, _result(future, name)


def _in_processes(
    function: Callable[..., R], calls: Mapping[str, Sequence[Any]], workers: int
) -> Iterator[tuple[str, R]]:
    """:func:`map_calls` on ``workers`` local processes, their log records sent back here."""
    context = multiprocessing.get_context("spawn")  # a fork would copy this process's threads
    records: Any = context.Queue()
    listener = QueueListener(records, _Relay())
    listener.start()
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_send_logs, initargs=(records, _levels())
    )
    try:
        futures = {pool.submit(function, *args): name for name, args in calls.items()}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except BrokenProcessPool as exc:
                raise ComputeError(
                    f"a local worker process died while computing {futures[future]!r} "
                    f"(killed for memory?); {workers} ran at once"
                ) from exc
    finally:
        # A caller that stops early (an error) does not wait for the calls left.
        pool.shutdown(wait=True, cancel_futures=True)
        listener.stop()


class _Relay(logging.Handler):
    """Hands a worker's record to this process's logger of the same name."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


def _levels() -> dict[str, int]:
    """This process's levels of prewarm's loggers, for the workers to filter alike."""
    from training.logs import PACKAGES

    return {name: logging.getLogger(name).getEffectiveLevel() for name in PACKAGES}


def _send_logs(records: Any, levels: Mapping[str, int]) -> None:
    """A worker's set-up: every record to ``records``, prewarm's at this process's levels,
    other libraries' from warnings up."""
    root = logging.getLogger()
    root.handlers = [QueueHandler(records)]
    root.setLevel(logging.WARNING)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def _result(future: Any, name: str) -> Any:
    """The future's value; the worker's own error when the call raised one."""
    from concurrent.futures import CancelledError

    from distributed.comm import CommClosedError
    from distributed.scheduler import KilledWorker

    try:
        return future.result()
    except (KilledWorker, CommClosedError, CancelledError) as exc:
        raise ComputeError(
            f"the Dask cluster lost the work of {name!r}: {type(exc).__name__}: {str(exc)[:100]}"
        ) from exc
