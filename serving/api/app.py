"""The serving app: ``create_app(settings, components)`` and its lifespan.

The lifespan builds the :class:`~serving.api.runtime.Runtime`, starts the gRPC external scaler
and the background refresher, and stops them in reverse order. Nothing happens at import.

Run it under uvicorn (``prewarm serve`` does)::

    app = create_app(settings, components)
    uvicorn.Server(uvicorn_config(app, settings)).run()

The two endpoints the autoscalers poll (an External Metrics value, a KEDA forecast) are
answered straight from the ASGI entry point of :class:`PrewarmApp`: path split, cached
selector, snapshot lookup, cached body. Routing, dependency resolution, and the middleware
stack would cost several times the work of the answer itself, on the endpoint that takes
the load. Everything else (discovery, health, listings, HEAD, odd paths) goes through
FastAPI, and both ways call the same functions, so they answer the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from forecaster.exceptions import shown
from serving.api import explain, external_metrics, health, keda
from serving.api.auth import (
    FrontProxyVerifier,
    client_common_names,
    recording_client_certificates,
)
from serving.api.certificates import ServingCertificate
from serving.api.grpc_server import GrpcServer
from serving.api.http_limits import bounded_requests
from serving.api.runtime import Runtime, ServingComponents
from serving.engine.observability import REFUSAL_LOG_INTERVAL, Throttle
from serving.exceptions import AuthenticationError, ServingError
from serving.settings import ServingSettings
from serving.wire import k8s

__all__ = ["PrewarmApp", "create_app", "uvicorn_config"]

logger = logging.getLogger(__name__)
# A caller without the aggregator's certificate retries as fast as it likes: one line per
# reason per interval, as for refused forecasts.
_REFUSED_LOG = Throttle(REFUSAL_LOG_INTERVAL)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_METRIC_PREFIX = f"{k8s.VERSION_PATH}/namespaces/"
_KEDA_PREFIX = "/v1/workloads/"
_KEDA_SUFFIX = "/forecast"
_JSON_HEADER = (b"content-type", k8s.CONTENT_TYPE.encode("latin-1"))


class PrewarmApp(FastAPI):
    """FastAPI with a direct path for the two polled endpoints (see the module docs)."""

    front_proxy = FrontProxyVerifier(required=False)
    """Checks the aggregator's client certificate on the metric paths; set by create_app."""

    certificate: ServingCertificate | None = None
    """The TLS certificate HTTP and gRPC present, following its files; set by create_app."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a metric request that did not come through the aggregator; answer a polled
        endpoint directly, or hand the request to FastAPI."""
        if scope["type"] == "http":
            if not await self._through_front_proxy(scope, receive, send):
                return
            runtime: Runtime | None = getattr(self.state, "runtime", None)
            if (
                scope["method"] == "GET"
                and runtime is not None
                and await _direct(runtime, scope, send)
            ):
                return
        await super().__call__(scope, receive, send)

    async def _through_front_proxy(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """False, after answering 401, when a metric path lacks the aggregator's certificate.

        Discovery, health and ``/metrics`` stay open: the aggregator's availability check,
        the kubelet's probes and Prometheus present no front-proxy certificate.
        """
        if not self.front_proxy.required:
            return True
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if not path.removeprefix(root).startswith(_METRIC_PREFIX):
            return True
        try:
            self.front_proxy.check(client_common_names(scope))
        except AuthenticationError as exc:
            fields = {"path": path[:100], "reason": str(exc)}
            _REFUSED_LOG.warn(logger, str(exc), "request refused", fields)
            await _status_response(*k8s.status_from_error(exc))(scope, receive, send)
            return False
        return True


async def _direct(runtime: Runtime, scope: Scope, send: Send) -> bool:
    """Answer ``scope`` if it is a metric value or a KEDA forecast; False to let FastAPI."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    authorization = next(
        (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
    )
    try:
        if path.startswith(_METRIC_PREFIX):
            namespace, slash, metric = path[len(_METRIC_PREFIX) :].partition("/")
            if not (namespace and slash and metric) or "/" in metric:
                return False  # not the route's shape: FastAPI answers (404, redirect...)
            query = scope["query_string"].decode("latin-1")
            status, body = (
                200,
                external_metrics.metric_reply(runtime, namespace, metric, query, authorization),
            )
        elif path.startswith(_KEDA_PREFIX) and path.endswith(_KEDA_SUFFIX):
            name = path[len(_KEDA_PREFIX) : -len(_KEDA_SUFFIX)]
            if not name or "/" in name:
                return False
            status, body = 200, keda.forecast_reply(runtime, name, authorization)
        else:
            return False
    except Exception as exc:  # the same answers as the app's exception handlers
        status, document = k8s.status_from_error(exc)
        if status >= 500 and not isinstance(exc, ServingError):
            logger.error("request failed", exc_info=exc, extra={"path": scope["path"][:100]})
        body = k8s.encode_json(document)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON_HEADER, (b"content-length", str(len(body)).encode("latin-1"))],
        }
    )
    await send({"type": "http.response.body", "body": body})
    return True


def _status_response(
    code: int, body: k8s.JSONDict, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        k8s.encode_json(body), status_code=code, media_type=k8s.CONTENT_TYPE, headers=headers
    )


async def _serving_error(request: Request, exc: Exception) -> Response:
    code, body = k8s.status_from_error(exc)
    if code >= 500 and not isinstance(exc, ServingError):
        logger.error("request failed", exc_info=exc, extra={"path": request.url.path[:100]})
    return _status_response(code, body)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = exc.status_code if exc.status_code in k8s.STATUS_REASONS else 500
    message = (
        f"the server could not find the requested resource {shown(request.url.path)}"
        if code == 404
        else str(exc.detail)
    )
    # Starlette's headers carry what the status needs, e.g. ``Allow`` on a 405.
    return _status_response(code, k8s.status_body(code, message), exc.headers)


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}"
        for error in exc.errors()
    )
    return _status_response(400, k8s.status_body(400, f"bad request: {problems}"))


def _warn_open(settings: ServingSettings, *, grpc_open: bool) -> None:
    """Say at start what answers callers without a token, and how to change it: anyone who
    reaches the HTTP port reads every workload's forecast and explanation, and, with no client
    CA either, can hold every stream slot of the gRPC scaler."""
    grpc = grpc_open and settings.grpc_port is not None
    logger.warning(
        "no token: the KEDA metrics-api, /v1/workloads and explain endpoints%s answer any "
        "caller that reaches them, who can read every workload's forecast and policy%s; set "
        "--token-file (PREWARM_TOKEN_FILE), or admit only KEDA and the API server to the "
        "ports (docs/install.md, Network policy)",
        " and the gRPC external scaler (no client CA either)" if grpc else "",
        " and hold all of the gRPC scaler's stream slots" if grpc else "",
        extra={"port": settings.port, "grpc_port": settings.grpc_port},
    )


def create_app(settings: ServingSettings, components: ServingComponents) -> PrewarmApp:
    """Build the FastAPI app; the lifespan starts the refresher and the gRPC server.

    Parameters
    ----------
    settings : ServingSettings
        Ports, TLS, token.
    components : ServingComponents
        Workloads config, history source factory, model registry.

    Returns
    -------
    PrewarmApp
        A FastAPI app; ``app.state.runtime`` holds the :class:`~serving.api.runtime.Runtime`
        once started.

    Raises
    ------
    ConfigError
        When TLS is configured and its files cannot be served (the message names the file).
    """
    certificate = ServingCertificate.of(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.build(settings, components, certificate)
        app.state.runtime = runtime
        if settings.shadow:
            logger.warning(
                "shadow mode: plans are exported on /metrics and /explain only; the External "
                "Metrics API, KEDA metrics-api and gRPC scaler answer 503 / UNAVAILABLE, so "
                "autoscalers hold"
            )
        if not runtime.verifier.enabled:
            _warn_open(settings, grpc_open=not (certificate and certificate.verifies_clients))
        grpc_server: GrpcServer | None = None
        if settings.grpc_port is not None:
            grpc_server = GrpcServer(
                runtime,
                host=settings.host,
                port=settings.grpc_port,
                certificate=certificate,
                max_streams=settings.grpc_max_streams,
            )
            runtime.grpc_port = await asyncio.to_thread(grpc_server.start)
        stop = asyncio.Event()
        task = asyncio.create_task(runtime.refresher.run(stop), name="refresher")
        try:
            yield
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if grpc_server is not None:
                await asyncio.to_thread(grpc_server.stop)
            await asyncio.to_thread(runtime.refresher.close)

    app = PrewarmApp(
        title="prewarm",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.front_proxy = FrontProxyVerifier(
        required=settings.client_ca is not None,
        allowed_names=settings.requestheader_allowed_names,
    )
    app.certificate = certificate
    app.include_router(external_metrics.router)
    app.include_router(keda.router)
    app.include_router(explain.router)
    app.include_router(health.router)
    app.add_exception_handler(ServingError, _serving_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _serving_error)
    return app


def uvicorn_config(app: Any, settings: ServingSettings, **overrides: Any) -> uvicorn.Config:
    """Uvicorn settings for ``app``: address, TLS and optional client-certificate check.

    With ``client_ca`` the TLS handshake verifies every client certificate presented against
    it (the aggregator's front-proxy CA) and refuses the connection on any other; clients
    without one are still accepted, because the kubelet's probes and Prometheus present
    none, and the app then refuses them on the metric paths (:class:`PrewarmApp`) from the
    certificate the HTTP protocol records.

    Uvicorn listens with the context it builds from the files; every handshake is handed to
    the current pair of the app's :class:`~serving.api.certificates.ServingCertificate`
    (:meth:`~serving.api.certificates.ServingCertificate.follow`), so a renewed certificate
    and CA reach new connections without a restart. An app that has none (not made by
    :func:`create_app`) follows one of its own.

    Uvicorn's ``auto`` loop picks ``uvloop``, and the HTTP protocol is ``httptools``' (both
    installed with ``uvicorn[standard]``): several times cheaper per request than asyncio's
    loop and h11. It is extended with bounds on each request's head size and read time
    (:mod:`serving.api.http_limits`). No access log: one log line per request would cost
    more than the answer.
    """
    protocol = bounded_requests()
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_config": None,
        "access_log": False,
        "server_header": False,
        "timeout_graceful_shutdown": 5,
        "http": protocol,
    }
    certificate = _serving_certificate(app, settings)
    if certificate is not None:
        options.update(
            ssl_certfile=str(settings.tls_cert),
            ssl_keyfile=str(settings.tls_key),
            ssl_context_factory=_following(certificate),
        )
        if settings.client_ca is not None:
            options.update(
                ssl_ca_certs=str(settings.client_ca),
                ssl_cert_reqs=ssl.CERT_OPTIONAL,
                http=recording_client_certificates(protocol),
            )
    options.update(overrides)
    return uvicorn.Config(app, **options)


def _serving_certificate(app: Any, settings: ServingSettings) -> ServingCertificate | None:
    """The app's certificate when TLS is on (create_app made it, and the app's gRPC server
    presents the same), else one of the settings' own; None without TLS."""
    if settings.tls_cert is None:
        return None
    made = getattr(app, "certificate", None)
    return made if isinstance(made, ServingCertificate) else ServingCertificate.of(settings)


def _following(
    certificate: ServingCertificate,
) -> Callable[[uvicorn.Config, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """Uvicorn's ``ssl_context_factory``: its own context, made to follow ``certificate``."""

    def factory(config: uvicorn.Config, default: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return certificate.follow(default())

    return factory
