"""The model the refresher plans with, and how a new registry version replaces it safely.

The registry is read through :class:`ModelRegistry` (``champion_version`` and
``load_model_version``); :class:`MlflowRegistry` forwards to ``training.registry``. A loaded
model is a :class:`~training.registry.LoadedModel` of a
:class:`~training.registry.PlanningModel`: ``plan(history)`` returns one row per workload with
``series, origin, forecast_demand, desired_replicas, quantile, lead_time_seconds``.

:class:`ModelWatcher` polls the alias. When it moves, the new version is loaded and must
plan on the current data before it replaces the model in use; if loading or planning fails,
the last good model keeps serving and the bad version is not retried until the alias moves
again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Protocol

from forecaster.exceptions import PrewarmError
from training import registry
from training.redaction import redact
from training.registry import LoadedModel, PlanningModel

__all__ = [
    "MlflowRegistry",
    "ModelLoadFailedError",
    "ModelRegistry",
    "ModelWatcher",
]

logger = logging.getLogger(__name__)


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

    Parameters
    ----------
    registry : ModelRegistry
        Where versions come from.
    name : str
        Registered model name.
    poll_interval : float
        Seconds between two alias look-ups.
    clock : callable, default time.monotonic
        Monotonic seconds.
    """

    def __init__(
        self,
        registry: ModelRegistry,
        name: str,
        *,
        poll_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.name = name
        self.poll_interval = poll_interval
        self._clock = clock
        self.current: LoadedModel[PlanningModel] | None = None
        self.rejected: dict[str, str] = {}
        self.last_error: str | None = None
        self._next_poll = -math.inf
        self.reloads = 0
        self.failures = 0

    def poll(
        self, validate: Callable[[LoadedModel[PlanningModel]], None], *, force: bool = False
    ) -> LoadedModel[PlanningModel] | None:
        """Look up the alias if due; load, validate and swap in a new version.

        Parameters
        ----------
        validate : callable
            Called with the candidate; raises if it cannot plan on the current data.
        force : bool, default False
            Look up even if the poll interval has not elapsed.

        Returns
        -------
        LoadedModel[PlanningModel] or None
            The model to serve: the new one after a successful swap, otherwise the current.
        """
        now = self._clock()
        if not force and now < self._next_poll:
            return self.current
        self._next_poll = now + self.poll_interval
        try:
            version = self.registry.champion_version(self.name)
        except Exception as exc:  # a registry outage must not stop serving the loaded model
            self.last_error = redact(f"registry lookup of {self.name!r} failed: {exc}")
            logger.warning(self.last_error, extra={"model_name": self.name})
            return self.current
        if version is None:
            if self.current is None:
                self.last_error = f"model {self.name!r} has no champion alias yet"
            return self.current
        if self.current is not None and self.current.version == version:
            return self.current
        if version in self.rejected:
            return self.current
        try:
            candidate = self.registry.load(self.name, version)
            validate(candidate)
        except Exception as exc:  # any failure keeps the last good model
            self.failures += 1
            message = redact(f"{type(exc).__name__}: {exc}")
            self.rejected[version] = message
            self.last_error = f"model {self.name!r} version {version} rejected: {message}"
            logger.error(
                "model version rejected, keeping the current one",
                extra={
                    "model_name": self.name,
                    "model_version": version,
                    "serving_version": self.current.version if self.current else None,
                    "error": message,
                },
            )
            return self.current
        previous = self.current
        self.current = candidate
        self.reloads += 1
        self.last_error = None
        logger.info(
            "model version loaded",
            extra={
                "model_name": self.name,
                "model_version": candidate.version,
                "previous_version": previous.version if previous else None,
            },
        )
        return candidate
