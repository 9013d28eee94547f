"""KEDA's ``externalscaler.ExternalScaler`` service, served from the same snapshot as HTTP.

Trigger metadata (``scalerMetadata``):

=======================  ==================================================================
``workload``             Required: the workload to scale.
``metric``               ``desired_replicas`` (default; target 1, so the HPA follows the
                         replica count) or ``forecast_demand`` (target = capacity per
                         replica x target utilization).
``activationThreshold``  Demand above which the workload counts as busy (default 0).
=======================  ==================================================================

``IsActive`` / ``StreamIsActive`` follow the activation rule of the workload's registered
policy (:mod:`forecaster.activation`): active when the forecast over the lead window gives
``P(demand > activationThreshold) > p``, ``p`` the registered ``activation_probability``,
that is when the window's ``(1 - p)`` quantile is above the threshold. The backtest tuned
``p`` and simulated exactly this rule, so KEDA wakes the workload from zero one cold start
*before* the traffic the forecast sees. A policy without the setting takes ``p = 1 - tau``:
active when the planned forecast demand is above the threshold.

Authentication is the HTTP KEDA endpoints' (:class:`~serving.api.auth.TokenVerifier`): when a
token is configured, every call must carry ``authorization: Bearer <token>`` metadata or answers
``UNAUTHENTICATED``. With a client CA configured the server requires a client certificate
chaining to it (mutual TLS): the handshake refuses a client without one, and a call over a
verified certificate needs no token. KEDA's ``external`` scaler sends no call metadata; it
authenticates with ``tlsClientCert`` / ``tlsClientKey`` (kedacore/keda
``pkg/scalers/external_scaler.go``), so run KEDA over mutual TLS when a token is configured.

Errors: unknown workload, or one configured in another namespace than the
``ScaledObjectRef``'s (empty: ``default``) -> ``NOT_FOUND``; missing or bad metadata ->
``INVALID_ARGUMENT``; stale forecast, or a model that does not forecast the quantile the
activation rule reads -> ``UNAVAILABLE`` (KEDA's fallback then applies).
``StreamMetricSpec`` answers ``UNIMPLEMENTED``, which keeps KEDA pull-only for specs.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

from forecaster.activation import is_active, window_quantile
from forecaster.exceptions import ConfigError, shown
from serving.api.certificates import CertificatePair, ServingCertificate
from serving.api.runtime import Runtime
from serving.exceptions import (
    ForecastUnavailableError,
    MetadataError,
    ServingError,
    TooManyError,
    UnknownMetricError,
    UnknownWorkloadError,
)
from serving.wire import k8s
from serving.wire.scaler_messages import metric_spec, metric_value, workload_from_metadata
from serving.wire.stubs import load_externalscaler

__all__ = [
    "MAX_MESSAGE_BYTES",
    "UNARY_WORKERS",
    "ExternalScalerServicer",
    "GrpcServer",
    "stream_limit",
]

logger = logging.getLogger(__name__)

_METRICS = {
    "desired_replicas": k8s.METRIC_DESIRED_REPLICAS,
    "forecast_demand": k8s.METRIC_FORECAST_DEMAND,
}


MAX_MESSAGE_BYTES = 1024 * 1024
"""Largest request or reply the server takes (gRPC's default is 4 MiB): KEDA's messages are a
few hundred bytes, a larger one answers ``RESOURCE_EXHAUSTED`` before it is decoded."""

UNARY_WORKERS = 16
"""Handler threads no ``StreamIsActive`` can take: each open stream holds a thread of the
server's pool for as long as it is open, so the pool is the stream limit plus these, and
``IsActive`` / ``GetMetricSpec`` / ``GetMetrics`` still answer when every stream slot is taken."""

_MIN_STREAMS = 16


def stream_limit(workloads: int) -> int:
    """Default number of ``StreamIsActive`` streams open at once: two per served workload, at
    least 16.

    KEDA opens one stream per ``external-push`` trigger (a ``min_replicas: 0`` workload's
    ScaledObject); the second slot takes the stream KEDA opens again after a disconnection,
    while the server has not yet seen the first one close (it looks every
    ``stream_poll_seconds``).

    Examples
    --------
    >>> stream_limit(3), stream_limit(100)
    (16, 200)
    """
    return max(_MIN_STREAMS, 2 * workloads)


_DEFAULT_NAMESPACE = "default"
"""The namespace of a ScaledObjectRef that names none (a workload's default too)."""

_CERTIFICATE = "x509_pem_cert"
"""The auth-context key gRPC sets when the peer presented a certificate the server verified."""


def _abort(context: grpc.ServicerContext, exc: ServingError) -> Any:
    context.abort(grpc.StatusCode[exc.grpc_code], str(exc))


def _authorization(context: grpc.ServicerContext) -> str | None:
    return next(
        (str(value) for key, value in context.invocation_metadata() if key == "authorization"),
        None,
    )


class ExternalScalerServicer:
    """Implements the four KEDA RPCs on top of a :class:`~serving.api.runtime.Runtime`.

    Parameters
    ----------
    runtime : Runtime
        Shared state; only its snapshot, config and metrics are read.
    pb2 : module
        Generated messages.
    max_streams : int, default 16
        ``StreamIsActive`` streams open at once; one more answers ``RESOURCE_EXHAUSTED``.
    stream_poll_seconds : float, default 5
        How often an open ``StreamIsActive`` re-checks activity when no refresh happened
        (a forecast can go stale without a new snapshot).
    """

    def __init__(
        self,
        runtime: Runtime,
        pb2: Any,
        *,
        max_streams: int = _MIN_STREAMS,
        stream_poll_seconds: float = 5.0,
    ) -> None:
        self.runtime = runtime
        self.pb2 = pb2
        self.max_streams = max_streams
        self.stream_poll_seconds = stream_poll_seconds
        self.stopping = threading.Event()
        self._stream_slots = threading.BoundedSemaphore(max_streams)

    # -- helpers ---------------------------------------------------------------------------
    def _authenticate(self, context: grpc.ServicerContext) -> None:
        """Accept a call over a verified client certificate or with the token, or raise."""
        if context.auth_context().get(_CERTIFICATE):
            return
        self.runtime.verifier.check(_authorization(context))

    def _workload(self, ref: Any) -> str:
        workload = workload_from_metadata(ref.scalerMetadata)
        # KEDA sends the ScaledObject's namespace; an empty one is Kubernetes' default.
        namespace = ref.namespace or _DEFAULT_NAMESPACE
        if self.runtime.namespaces.get(workload) != namespace:
            # As on the External Metrics API, a workload of another namespace answers as an
            # unknown one: a ScaledObject must not read across namespaces. The caller is
            # authenticated (see _authenticate): it may see the configured names.
            configured = self.runtime.store.current.workloads
            raise UnknownWorkloadError.of(workload, configured, namespace=namespace)
        return workload

    @staticmethod
    def _metric(ref: Any) -> str:
        key = ref.scalerMetadata.get("metric", "desired_replicas").strip() or "desired_replicas"
        if key not in _METRICS:
            raise MetadataError(
                f"trigger metadata `metric` must be one of {sorted(_METRICS)}, got {shown(key)}"
            )
        return _METRICS[key]

    @staticmethod
    def _threshold(ref: Any) -> float:
        text = ref.scalerMetadata.get("activationThreshold", "0").strip() or "0"
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise MetadataError(
                f"trigger metadata `activationThreshold` must be a number >= 0, got {shown(text)}"
            )
        return value

    def _active(self, ref: Any) -> bool:
        workload = self._workload(ref)
        # The metric is not read here, but a trigger whose metric GetMetricSpec refuses must
        # not wake the workload either.
        self._metric(ref)
        threshold = self._threshold(ref)
        forecast = self.runtime.forecast(workload, api="grpc")
        probability = self.runtime.registered_policy(workload).activation_p
        window = {forecast.quantile: forecast.forecast_demand, **forecast.quantiles}
        try:
            value = window_quantile(window, probability)
        except ConfigError as exc:
            raise ForecastUnavailableError(
                f"workload {shown(workload)}: {exc}", cause="no_forecast"
            ) from None
        return bool(is_active(value, threshold))

    # -- RPCs ------------------------------------------------------------------------------
    def IsActive(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """True when the registered activation rule says the lead window will see demand."""
        try:
            self._authenticate(context)
            return self.pb2.IsActiveResponse(result=self._active(request))
        except ServingError as exc:
            return _abort(context, exc)

    def StreamIsActive(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:  # noqa: N802
        """Push the activity now, then again every time it changes; at most ``max_streams``
        at once."""
        try:
            self._authenticate(context)  # first: a caller without the token takes no slot
            if not self._stream_slots.acquire(blocking=False):
                raise TooManyError(
                    f"at most {self.max_streams} StreamIsActive streams are served at once "
                    "(PREWARM_GRPC_MAX_STREAMS) and all are open; retry later, IsActive answers"
                )
        except ServingError as exc:
            _abort(context, exc)
            return
        try:
            yield from self._stream_activity(request, context)
        finally:
            self._stream_slots.release()

    def _stream_activity(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        store = self.runtime.store
        last: bool | None = None
        seen = store.current
        while context.is_active() and not self.stopping.is_set():
            try:
                active = self._active(request)
            except ServingError as exc:
                _abort(context, exc)
                return
            if active != last:
                last = active
                yield self.pb2.IsActiveResponse(result=active)
            seen = store.wait_for_change(seen, timeout=self.stream_poll_seconds)

    def GetMetricSpec(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """One metric: desired replicas (target 1) or forecast demand (the registered policy's
        capacity x forecast utilization)."""
        try:
            self._authenticate(context)
            workload = self._workload(request)
            metric = self._metric(request)
            self._threshold(request)
            target = (
                1.0
                if metric == k8s.METRIC_DESIRED_REPLICAS
                else self.runtime.registered_policy(workload).forecast_target
            )
            spec_message = metric_spec(self.pb2, metric, target)
            return self.pb2.GetMetricSpecResponse(metricSpecs=[spec_message])
        except ServingError as exc:
            return _abort(context, exc)

    def GetMetrics(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """The current value of the requested metric (UNAVAILABLE while stale)."""
        try:
            self._authenticate(context)
            ref = request.scaledObjectRef
            workload = self._workload(ref)
            name = request.metricName or self._metric(ref)
            if name not in _METRICS.values():
                raise UnknownMetricError(
                    f"unknown metric {shown(name)}; served metrics: {', '.join(_METRICS.values())}",
                    metric=name,
                )
            forecast = self.runtime.forecast(workload, api="grpc")
            value = (
                float(forecast.desired_replicas)
                if name == k8s.METRIC_DESIRED_REPLICAS
                else forecast.forecast_demand
            )
            return self.pb2.GetMetricsResponse(metricValues=[metric_value(self.pb2, name, value)])
        except ServingError as exc:
            return _abort(context, exc)

    def StreamMetricSpec(self, request: Any, context: grpc.ServicerContext) -> Any:  # noqa: N802
        """Not implemented: KEDA then stays pull-only for metric specs."""
        try:
            self._authenticate(context)
        except ServingError as exc:
            return _abort(context, exc)
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "StreamMetricSpec is not implemented")


class GrpcServer:
    """A gRPC server in its own threads, serving :class:`ExternalScalerServicer`.

    Parameters
    ----------
    runtime : Runtime
        Shared state.
    host : str
        Bind address.
    port : int
        Port; 0 picks a free one (see :attr:`port` after :meth:`start`).
    certificate : ServingCertificate or None
        Serve TLS with its current pair, taken up at each new connection; when it verifies
        clients (``client_ca``), require a client certificate chaining to its CA (mutual TLS).
        None: plain text.
    max_streams : int or None, default None
        ``StreamIsActive`` streams served at once (each holds a handler thread); None:
        :func:`stream_limit` of the served workloads. The pool has :data:`UNARY_WORKERS`
        more threads, which only the unary RPCs use.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str,
        port: int,
        certificate: ServingCertificate | None = None,
        max_streams: int | None = None,
    ) -> None:
        self.runtime = runtime
        self.host = host
        self.requested_port = port
        self.certificate = certificate
        self.max_streams = (
            stream_limit(len(runtime.components.config.workloads))
            if max_streams is None
            else max_streams
        )
        self.port: int | None = None
        self._server: grpc.Server | None = None
        self._servicer: ExternalScalerServicer | None = None

    def start(self) -> int:
        """Bind and start; return the bound port."""
        stubs = load_externalscaler()
        server = grpc.server(
            futures.ThreadPoolExecutor(self.max_streams + UNARY_WORKERS, "grpc"),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                # gRPC's default SO_REUSEPORT let a second server bind a port in use and take
                # a share of the connections KEDA opens: binding must fail instead.
                ("grpc.so_reuseport", 0),
            ],
        )
        servicer = ExternalScalerServicer(self.runtime, stubs.pb2, max_streams=self.max_streams)
        stubs.pb2_grpc.add_ExternalScalerServicer_to_server(servicer, server)
        address = f"{self.host}:{self.requested_port}"
        try:
            if self.certificate is not None:
                port = server.add_secure_port(address, _credentials(self.certificate))
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio's "Failed to bind", e.g. the port is in use
            raise OSError(f"cannot bind the gRPC server to {address}: {str(exc)[:200]}") from None
        if port == 0:
            raise OSError(f"cannot bind the gRPC server to {address}")
        server.start()
        self._server, self._servicer, self.port = server, servicer, port
        logger.info(
            "gRPC external scaler listening",
            extra={"address": f"{self.host}:{port}", "max_streams": self.max_streams},
        )
        return port

    def stop(self, grace: float = 2.0) -> None:
        """Close open streams and stop."""
        if self._servicer is not None:
            self._servicer.stopping.set()
            self.runtime.store.wake_all()
        if self._server is not None:
            self._server.stop(grace).wait(grace + 1)
            self._server = None


def _configuration(pair: CertificatePair) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(pair.key, pair.certificate)], root_certificates=pair.client_ca
    )


def _credentials(certificate: ServingCertificate) -> grpc.ServerCredentials:
    """Server credentials that follow ``certificate``: gRPC calls the fetcher before each new
    connection's handshake, and takes the configuration it returns (None: no change)."""
    served = certificate.current()

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        nonlocal served
        pair = certificate.current()
        if pair is served:
            return None
        served = pair
        return _configuration(pair)

    return grpc.dynamic_ssl_server_credentials(
        _configuration(served), fetch, require_client_authentication=certificate.verifies_clients
    )
