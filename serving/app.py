"""The serving app: ``create_app(settings, components)`` and its lifespan.

The lifespan builds the :class:`~serving.runtime.Runtime`, starts the gRPC external scaler
and the background refresher, and stops them in reverse order. Nothing happens at import.

Run it under uvicorn (``prewarm serve`` does)::

    app = create_app(settings, components)
    uvicorn.Server(uvicorn_config(app, settings)).run()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from serving import external_metrics, health, k8s, keda
from serving.exceptions import ServingError
from serving.grpc_server import GrpcServer
from serving.runtime import Runtime, ServingComponents
from serving.settings import ServingSettings

__all__ = ["create_app", "uvicorn_config"]

logger = logging.getLogger(__name__)


def _status_response(code: int, body: k8s.JSONDict) -> Response:
    return Response(k8s.encode_json(body), status_code=code, media_type=k8s.CONTENT_TYPE)


async def _serving_error(request: Request, exc: Exception) -> Response:
    code, body = k8s.status_from_error(exc)
    if code >= 500 and not isinstance(exc, ServingError):
        logger.error("request failed", exc_info=exc, extra={"path": request.url.path})
    return _status_response(code, body)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = exc.status_code if exc.status_code in k8s.STATUS_REASONS else 500
    message = (
        f"the server could not find the requested resource {request.url.path}"
        if code == 404
        else str(exc.detail)
    )
    return _status_response(code, k8s.status_body(code, message))


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}"
        for error in exc.errors()
    )
    return _status_response(400, k8s.status_body(400, f"bad request: {problems}"))


def create_app(settings: ServingSettings, components: ServingComponents) -> FastAPI:
    """Build the FastAPI app; the lifespan starts the refresher and the gRPC server.

    Parameters
    ----------
    settings : ServingSettings
        Ports, TLS, token.
    components : ServingComponents
        Workloads config, history source factory, model registry.

    Returns
    -------
    FastAPI
        ``app.state.runtime`` holds the :class:`~serving.runtime.Runtime` once started.
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.build(settings, components)
        app.state.runtime = runtime
        grpc_server: GrpcServer | None = None
        if settings.grpc_port is not None:
            grpc_server = GrpcServer(
                runtime,
                host=settings.host,
                port=settings.grpc_port,
                tls_cert=settings.tls_cert,
                tls_key=settings.tls_key,
                client_ca=settings.client_ca,
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

    app = FastAPI(
        title="prewarm",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.include_router(external_metrics.router)
    app.include_router(keda.router)
    app.include_router(health.router)
    app.add_exception_handler(ServingError, _serving_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _serving_error)
    return app


def uvicorn_config(app: Any, settings: ServingSettings, **overrides: Any) -> uvicorn.Config:
    """Uvicorn settings for ``app``: address, TLS and optional client-certificate check.

    With ``client_ca`` the TLS handshake verifies every client certificate presented against
    it (the aggregator's front-proxy CA); clients without one are still accepted, because the
    kubelet's probes cannot present one.
    """
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_config": None,
        "access_log": False,
        "server_header": False,
        "timeout_graceful_shutdown": 5,
    }
    if settings.tls_cert is not None:
        options.update(ssl_certfile=str(settings.tls_cert), ssl_keyfile=str(settings.tls_key))
        if settings.client_ca is not None:
            options.update(ssl_ca_certs=str(settings.client_ca), ssl_cert_reqs=ssl.CERT_OPTIONAL)
    options.update(overrides)
    return uvicorn.Config(app, **options)
