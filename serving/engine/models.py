"""The model the refresher plans with, and how a new registry version replaces it safely.

The registry is read through :class:`ModelRegistry` (``champion_version`` and
``load_model_version``); :class:`MlflowRegistry` forwards to ``training.registry``. A loaded
model is a :class:`~training.registry.LoadedModel` of a
:class:`~training.registry.PlanningModel`: ``plan(history)`` returns one row per workload with
``series, origin, forecast_demand, desired_replicas, quantile, lead_time_seconds``.

:class:`ModelWatcher` polls the alias in a thread of its own. When it moves, the new version
is loaded there, and must plan on the current data (on the refresh path, which never waits
for the registry) before it replaces the model in use; if loading or planning fails, the last
good model keeps serving. A refused version is tried again after a delay that doubles from
the poll interval up to :data:`RETRY_CAP`: what refused it may pass (an artifact store that
was briefly unreachable, a window of bad data), and it is served once it loads and plans.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from forecaster.exceptions import PrewarmError
from training import registry
from training.redaction import redact
from training.registry import LoadedModel, PlanningModel

__all__ = [
    "RETRY_CAP",
    "MlflowRegistry",
    "ModelLoadFailedError",
    "ModelRegistry",
    "ModelWatcher",
]

logger = logging.getLogger(__name__)

RETRY_CAP = 900.0
"""Longest delay, in seconds, before a refused version is tried again: a version refused for
a passing reason is served within a quarter of an hour of that reason passing, and a broken
one costs a load every quarter of an hour."""


class ModelRegistry(Protocol):
    """Where models come from: the alias's current version, and a loader by version."""

    def champion_version(self, name: str) -> str | None:
        """Version the ``champion`` alias points at, or None when there is none."""
        ...

    def load(self, name: str, version: str) -> LoadedModel[PlanningModel]:
        """Load and validate one version; raise on any failure."""
        ...


class ModelLoadFailedError(PrewarmError):
    """A model version could not be loaded, or could not plan on the current data."""


class MlflowRegistry:
    """The MLflow model registry, read through ``training.registry``.

    Parameters
    ----------
    tracking_uri : str or None
        MLflow tracking URI; None uses MLflow's default resolution
        (``MLFLOW_TRACKING_URI``, then the local store).
    """

    def __init__(self, tracking_uri: str | None = None) -> None:
        self.tracking_uri = tracking_uri

    def champion_version(self, name: str) -> str | None:
        """Version behind ``models:/<name>@champion``, or None."""
        return registry.champion_version(name, tracking_uri=self.tracking_uri)

    def load(self, name: str, version: str) -> LoadedModel[PlanningModel]:
        """Load ``models:/<name>/<version>`` (validated by the training loader)."""
        return registry.load_model_version(name, version, tracking_uri=self.tracking_uri)


class ModelWatcher:
    """Keeps the served model in step with the registry alias, never swapping in a bad one.

    The registry is read off the refresh path: :meth:`start` runs :meth:`check` (look up the
    alias, load the version it names) in a thread of its own every ``poll_interval``, and the
    refresher calls :meth:`adopt`, which never touches the registry. MLflow's client retries
    a dead server for minutes per call; inline, that stopped every refresh, and the data of
    every workload went stale while a good model sat loaded.

    Parameters
    ----------
    registry : ModelRegistry
        Where versions come from.
    name : str
        Registered model name.
    poll_interval : float
        Seconds between two alias look-ups; also the first delay before a refused version
        is tried again.
    retry_cap : float, default RETRY_CAP
        Longest delay before a refused version is tried again (at least ``poll_interval``).
    clock : callable, default time.monotonic
        Monotonic seconds.
    """

    def __init__(
        self,
        registry: ModelRegistry,
        name: str,
        *,
        poll_interval: float = 60.0,
        retry_cap: float = RETRY_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.name = name
        self.poll_interval = poll_interval
        self.retry_cap = max(retry_cap, poll_interval)
        self._clock = clock
        self.current: LoadedModel[PlanningModel] | None = None
        self.rejected: dict[str, str] = {}
        """Version -> why it was refused, until it loads and plans."""
        self._retry: dict[str, _Retry] = {}
        self.last_error: str | None = None
        self.reloads = 0
        self.failures = 0
        self.looked_up = threading.Event()
        """Set once the first look-up has finished, whatever its outcome."""
        # The poller thread writes what the refresher and the request handlers read.
        self._lock = threading.Lock()
        self._candidate: LoadedModel[PlanningModel] | None = None
        self._stop: threading.Event | None = None
        self._busy_since: float | None = None

    # -- the poller thread -------------------------------------------------------------------
    def start(self) -> None:
        """Poll the registry every ``poll_interval`` in a daemon thread until :meth:`stop`."""
        if self._stop is not None:
            return
        # Each thread has its own event: a look-up still hanging in a stopped thread must not
        # be woken into polling again by the next start.
        stop = self._stop = threading.Event()
        threading.Thread(
            target=self._poll_until, args=(stop,), name="model-watcher", daemon=True
        ).start()

    def stop(self) -> None:
        """Stop polling, without waiting for a look-up under way.

        A hung look-up is left to end in its daemon thread: waiting for it would outlast a
        pod's termination grace period, and whatever it finds is never used.
        """
        stop, self._stop = self._stop, None
        if stop is not None:
            stop.set()

    def _poll_until(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.check()
            except Exception:  # the poller must outlive anything one look-up does
                logger.exception("model registry poll failed", extra={"model_name": self.name})
            stop.wait(self.poll_interval)

    # -- registry side: blocking, never on the refresh path ---------------------------------
    def check(self) -> None:
        """Look up the alias and load the version it names if it is new: the blocking part.

        The loaded version waits for :meth:`adopt` to validate it on the current data. Run by
        the poller thread; a caller that drives the watcher itself calls it directly.
        """
        started = self._busy_since = self._clock()
        try:
            version = self._lookup()
            if version is not None and self._due(version):
                self._load(version)
        finally:
            # A look-up of a stopped poller may end while a newer one runs: it is not its
            # to clear.
            if self._busy_since == started:
                self._busy_since = None
            self.looked_up.set()

    def busy_for(self) -> float:
        """Seconds the look-up (and load) under way has run; 0 when none is.

        A hung MLflow shows nowhere else while a model is loaded: nothing has failed yet, and
        the served model is fine. Far past ``poll_interval``, the registry is not answering.
        """
        since = self._busy_since
        return 0.0 if since is None else max(self._clock() - since, 0.0)

    def _lookup(self) -> str | None:
        """The alias's version, or None (after recording why) when there is none to load."""
        try:
            version = self.registry.champion_version(self.name)
        except Exception as exc:  # a registry outage must not stop serving the loaded model
            error = redact(f"registry lookup of {self.name!r} failed: {exc}")
            with self._lock:
                self.last_error = error
            logger.warning(error, extra={"model_name": self.name})
            return None
        if version is None:
            with self._lock:
                if self.current is None:
                    self.last_error = f"model {self.name!r} has no champion alias yet"
        return version

    def _due(self, version: str) -> bool:
        """Whether ``version`` has to be loaded: not served, not waiting for :meth:`adopt`, and
        not refused, or refused and due for its next try."""
        with self._lock:
            if self._candidate is not None and self._candidate.version != version:
                self._candidate = None  # the alias moved on (or back) before it was adopted
            if self.current is not None and self.current.version == version:
                # The alias answers again and names what is served: an earlier look-up
                # failure is over.
                self.last_error = None
                return False
            if self._candidate is not None:
                return False
            retry = self._retry.get(version)
            if retry is not None and self._clock() < retry.at:
                # Still refused: say so, rather than an earlier look-up failure that is over.
                self.last_error = self._refusal(version)
                return False
            return True

    def _load(self, version: str) -> None:
        try:
            candidate = self.registry.load(self.name, version)
        except Exception as exc:  # any failure keeps the last good model
            self._reject(version, exc)
            return
        with self._lock:
            self._candidate = candidate

    # -- refresh side: never blocks on the registry -----------------------------------------
    def adopt(
        self, validate: Callable[[LoadedModel[PlanningModel]], None]
    ) -> LoadedModel[PlanningModel] | None:
        """Swap in the version :meth:`check` loaded, if any, once it has passed ``validate``.

        Parameters
        ----------
        validate : callable
            Called with the candidate; raises if it cannot plan on the current data.

        Returns
        -------
        LoadedModel[PlanningModel] or None
            The model to serve: the new one after a successful swap, otherwise the current.
        """
        with self._lock:
            candidate = self._candidate
        if candidate is None:
            return self.current
        try:
            validate(candidate)
        except Exception as exc:  # any failure keeps the last good model
            self._reject(candidate.version, exc, drop=candidate)
            return self.current
        with self._lock:
            # It waited until now, rather than being taken first, so that the poller would not
            # load the same version again meanwhile.
            if self._candidate is not candidate:
                return self.current  # the alias moved while it was being validated
            self._candidate = None
            previous, self.current = self.current, candidate
            self.reloads += 1
            self.last_error = None
            self.rejected.pop(candidate.version, None)
            self._retry.pop(candidate.version, None)
        logger.info(
            "model version loaded",
            extra={
                "model_name": self.name,
                "model_version": candidate.version,
                "previous_version": previous.version if previous else None,
            },
        )
        return candidate

    def _reject(
        self, version: str, exc: Exception, drop: LoadedModel[PlanningModel] | None = None
    ) -> None:
        """Record ``version`` as refused for ``exc`` until its next try (and stop ``drop``
        from waiting). ``failures`` counts versions refused, not their failed tries."""
        message = redact(f"{type(exc).__name__}: {exc}")
        with self._lock:
            if drop is not None and self._candidate is drop:
                self._candidate = None
            if version not in self.rejected:
                self.failures += 1
            self.rejected[version] = message
            previous = self._retry.get(version)
            delay = self.poll_interval if previous is None else previous.delay * 2
            delay = min(delay, self.retry_cap)
            self._retry[version] = _Retry(self._clock() + delay, delay)
            self.last_error = self._refusal(version)
            serving = self.current.version if self.current else None
        logger.error(
            "model version rejected, keeping the current one",
            extra={
                "model_name": self.name,
                "model_version": version,
                "serving_version": serving,
                "error": message,
                "retry_in_seconds": delay,
            },
        )

    def _refusal(self, version: str) -> str:
        return f"model {self.name!r} version {version} rejected: {self.rejected[version]}"

    def rejected_versions(self) -> list[str]:
        """The versions refused and not served since, sorted (safe to call while the poller
        runs)."""
        with self._lock:
            return sorted(self.rejected)


@dataclass(frozen=True)
class _Retry:
    """When a refused version is tried next, and the delay that led there (doubled next)."""

    at: float
    delay: float
