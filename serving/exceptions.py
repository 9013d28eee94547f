"""Errors raised by the serving layer.

Each error that can reach a client carries the HTTP status and the gRPC status code name it
maps to, so the app needs one exception handler (see :func:`serving.wire.k8s.status_from_error`),
the gRPC servicer one ``context.abort(grpc.StatusCode[exc.grpc_code], str(exc))``, and
clients never see a traceback. Messages name the argument at fault and echo the offending value,
at most :data:`~forecaster.exceptions.SHOWN_CHARS` characters of it
(:func:`~forecaster.exceptions.shown`): a client's input is never echoed whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from forecaster.exceptions import PrewarmError, shown

_LISTED_WORKLOADS = 20
"""At most this many configured workload names are listed in an unknown-workload error."""


class ServingError(PrewarmError):
    """Base class of the serving errors; maps to HTTP 500 unless a subclass says otherwise."""

    http_status: int = 500
    grpc_code: str = "INTERNAL"


class QuantityError(ServingError, ValueError):
    """A value cannot be written as a Kubernetes ``resource.Quantity`` (NaN, inf, negative...)."""


class SelectorError(ServingError, ValueError):
    """A label selector is malformed or does not pick exactly one workload (HTTP 400).

    Parameters
    ----------
    message : str
        Full explanation, naming the selector.
    selector : str
        The selector text as received (after URL decoding).
    position : int or None
        0-based character offset of the problem in ``selector``, when it has one.
    """

    http_status = 400
    grpc_code = "INVALID_ARGUMENT"

    def __init__(self, message: str, *, selector: str, position: int | None = None) -> None:
        super().__init__(message)
        self.selector = selector
        self.position = position


class MetadataError(ServingError, ValueError):
    """KEDA trigger metadata lacks a needed key or holds a bad value (gRPC INVALID_ARGUMENT)."""

    http_status = 400
    grpc_code = "INVALID_ARGUMENT"


class UnknownMetricError(ServingError, LookupError):
    """The requested external metric is not one prewarm serves (HTTP 404)."""

    http_status = 404
    grpc_code = "NOT_FOUND"

    def __init__(self, message: str, *, metric: str) -> None:
        super().__init__(message)
        self.metric = metric


class UnknownWorkloadError(ServingError, LookupError):
    """No workload with that name is configured (HTTP 404)."""

    http_status = 404
    grpc_code = "NOT_FOUND"

    def __init__(self, message: str, *, workload: str) -> None:
        super().__init__(message)
        self.workload = workload

    @classmethod
    def of(
        cls, workload: str, configured: Sequence[str] | None, *, namespace: str | None = None
    ) -> UnknownWorkloadError:
        """The error a client is answered: the name echoed bounded, the configured names only
        when the caller may see them.

        Parameters
        ----------
        workload : str
            The name asked for.
        configured : sequence of str or None
            The configured names, listed (at most 20); None for a caller who may not see
            them (not authenticated while a token is configured).
        namespace : str or None
            The namespace it was asked in, when there is one (the External Metrics API).
        """
        if configured is None:
            listed = "the configured workloads are listed to authenticated callers"
        else:
            shown_names = ", ".join(configured[:_LISTED_WORKLOADS])
            more = ", ..." if len(configured) > _LISTED_WORKLOADS else ""
            listed = f"configured workloads: {shown_names + more or 'none'}"
        where = "" if namespace is None else f" in namespace {shown(namespace)}"
        return cls(f"unknown workload {shown(workload)}{where}; {listed}", workload=workload)


class AuthenticationError(ServingError):
    """The request carries no credentials or wrong ones (HTTP 401)."""

    http_status = 401
    grpc_code = "UNAUTHENTICATED"


class PermissionDeniedError(ServingError):
    """The caller is authenticated but not allowed (HTTP 403)."""

    http_status = 403
    grpc_code = "PERMISSION_DENIED"


class TooManyError(ServingError):
    """The server already holds as many of these (streams, connections) as it may (HTTP 429,
    gRPC ``RESOURCE_EXHAUSTED``); the message names the limit."""

    http_status = 429
    grpc_code = "RESOURCE_EXHAUSTED"


class ForecastUnavailableError(ServingError):
    """No value to serve right now: stale data, a source error, a failed prediction, a policy
    drift or shadow mode (503).

    Answering 503 instead of a low number makes the HPA hold its current replica count and
    lets KEDA's fallback apply.

    Parameters
    ----------
    message : str
        Why, naming the workload.
    cause : str, default "no_forecast"
        The kind of refusal (``stale``, ``drift``, ``no_model``, ``no_forecast``,
        ``shadow``): the ``reason`` label of ``prewarm_unavailable_responses_total``.
    """

    http_status = 503
    grpc_code = "UNAVAILABLE"

    def __init__(self, message: str, *, cause: str = "no_forecast") -> None:
        super().__init__(message)
        self.cause = cause


class StubGenerationError(ServingError, RuntimeError):
    """The gRPC stubs could not be generated from ``serving/proto/externalscaler.proto``."""
