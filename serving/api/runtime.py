"""Everything one serving process shares between its HTTP routes and its gRPC servicer.

:class:`ServingComponents` is what a caller provides (config, history source, registry);
:class:`Runtime` is what the app builds from it at start-up. Routes reach the runtime through
the ``Annotated`` dependencies defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from forecaster.workload import WorkloadPolicy
from serving.api.auth import TokenVerifier
from serving.api.certificates import ServingCertificate
from serving.engine.models import ModelRegistry, ModelWatcher
from serving.engine.observability import ServingMetrics
from serving.engine.refresher import Refresher, empty_snapshot
from serving.engine.snapshot import Snapshot, SnapshotStore, WorkloadForecast
from serving.engine.window import HistorySource
from serving.exceptions import ForecastUnavailableError
from serving.settings import RefreshConfig, ServingSettings
from serving.wire.replies import Replies

__all__ = [
    "Authorized",
    "CurrentSnapshot",
    "Runtime",
    "RuntimeDep",
    "ServingComponents",
]


@dataclass(frozen=True)
class ServingComponents:
    """The parts a serving process is assembled from.

    Parameters
    ----------
    config : RefreshConfig
        Workloads, model name and intervals.
    source_factory : callable
        Returns a new history source (e.g. a ``PrometheusSource``).
    registry : ModelRegistry
        Where the champion model comes from.
    """

    config: RefreshConfig
    source_factory: Callable[[], HistorySource]
    registry: ModelRegistry


@dataclass
class Runtime:
    """Shared state of a running app; built by :func:`serving.api.app.create_app`'s lifespan."""

    settings: ServingSettings
    components: ServingComponents
    store: SnapshotStore[Replies]
    metrics: ServingMetrics
    verifier: TokenVerifier
    watcher: ModelWatcher
    refresher: Refresher
    namespaces: Mapping[str, str] = field(default_factory=dict)
    """Workload -> the namespace its External Metrics value is served under."""
    grpc_port: int | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        settings: ServingSettings,
        components: ServingComponents,
        certificate: ServingCertificate | None = None,
    ) -> Runtime:
        """Assemble the runtime (no I/O: nothing is fetched or loaded yet); with
        ``certificate``, the one the servers present, whose reloads ``/metrics`` counts."""
        config = components.config
        store = SnapshotStore(empty_snapshot(config, shadow=settings.shadow), Replies)
        watcher = ModelWatcher(
            components.registry, config.model_name, poll_interval=config.serving.poll_model_every
        )
        metrics = ServingMetrics(
            lambda: store.current,
            model_changes=lambda: (watcher.reloads, watcher.failures),
            rejected_versions=lambda: len(watcher.rejected_versions()),
            registry_busy=watcher.busy_for,
            tls_changes=None
            if certificate is None
            else lambda: (certificate.reloads, certificate.failures),
            tls_expiry=None
            if certificate is None
            else lambda: certificate.current().not_after.timestamp(),
        )
        refresher = Refresher(
            config, components.source_factory, watcher, store, metrics, shadow=settings.shadow
        )
        return cls(
            settings=settings,
            components=components,
            store=store,
            metrics=metrics,
            verifier=TokenVerifier(settings.bearer_token()),
            watcher=watcher,
            refresher=refresher,
            namespaces={w.name: w.namespace for w in config.workloads},
        )

    def forecast(self, workload: str, api: str) -> WorkloadForecast:
        """The servable forecast of ``workload``; a refusal is counted (and logged, rate-limited).

        Raises
        ------
        UnknownWorkloadError
            Unknown name.
        ForecastUnavailableError
            Stale or missing forecast.
        """
        try:
            return self.store.current.forecast(workload)
        except ForecastUnavailableError as exc:
            self.metrics.refused(api, workload, exc)
            raise

    def registered_policy(self, workload: str) -> WorkloadPolicy:
        """The policy registered for ``workload`` with the served model version.

        Raises
        ------
        UnknownWorkloadError
            Unknown name.
        ForecastUnavailableError
            No model loaded yet, or the served version has no policy for the workload.
        """
        self.store.current.state(workload)
        served = self.watcher.current
        policy = served.model.policies.get(workload) if served is not None else None
        if policy is None:
            problem = (
                "no model loaded yet"
                if served is None
                else f"model version {served.version} has no policy for it"
            )
            raise ForecastUnavailableError(
                f"no registered policy for workload {workload!r}: {problem}",
                cause="no_model" if served is None else "no_forecast",
            )
        return policy


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
"""The app's :class:`Runtime`."""


def _snapshot(runtime: RuntimeDep) -> Snapshot:
    return runtime.store.current


CurrentSnapshot = Annotated[Snapshot, Depends(_snapshot)]
"""The snapshot current when the request arrived."""


def _authorize(runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None) -> None:
    runtime.verifier.check(authorization)


Authorized = Annotated[None, Depends(_authorize)]
"""Requires the bearer token when one is configured (401 otherwise)."""
