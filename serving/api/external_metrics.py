"""Routes of the Kubernetes External Metrics API (``external.metrics.k8s.io/v1beta1``).

Discovery documents are open to every caller (the kube-aggregator's availability check must
get a 2xx); a metric value is a snapshot read. The selector is decoded from the raw query
string, so ``+`` and percent-escapes are read exactly as Go's ``url.Values.Encode`` wrote them.

:func:`metric_reply` is the whole per-request work of a metric value: the app calls it
straight from its ASGI entry point (see :mod:`serving.api.app`) and the route below is the same
function behind FastAPI, for the methods and paths the direct path does not take.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response

from serving.api import schemas
from serving.api.runtime import Runtime, RuntimeDep
from serving.exceptions import AuthenticationError, UnknownWorkloadError
from serving.wire import k8s
from serving.wire.replies import encode_metric
from serving.wire.selector import selector_from_query, workload_from_selector

__all__ = ["metric_reply", "router", "workload_for_query"]

router = APIRouter(tags=["external metrics"])

# The documents never change: encode them once.
_API_GROUP_LIST = k8s.encode_json(k8s.api_group_list())
_API_GROUP = k8s.encode_json(k8s.api_group())
_API_RESOURCE_LIST = k8s.encode_json(k8s.api_resource_list())


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=k8s.CONTENT_TYPE)


@lru_cache(maxsize=1024)
def workload_for_query(query: str) -> str:
    """The workload a raw query string's ``labelSelector`` pins; parsed once per query text.

    The HPA repeats the same few query strings every sync period, so parsing is cached by
    the raw text (bounded: at most 1,024 distinct strings are kept, least recently used
    first out). Errors are not cached; they raise every time, cheaply: a query too long to
    hold a selector of :data:`~serving.wire.selector.MAX_SELECTOR_CHARS` characters is refused
    before it is decoded or parsed.

    Raises
    ------
    SelectorError
        Too long, malformed, or not pinning exactly one workload (HTTP 400).
    """
    return workload_from_selector(selector_from_query(query))


def _listed_to(runtime: Runtime, authorization: str | None) -> Sequence[str] | None:
    """The configured workload names, or None when this caller may not see them.

    The External Metrics API needs no token (the aggregator presents none), so a 404 lists
    the names only to a caller with the token, or to everyone when no token is configured
    (``/v1/workloads`` then lists them to everyone too).
    """
    try:
        runtime.verifier.check(authorization)
    except AuthenticationError:
        return None
    return runtime.store.current.workloads


def metric_reply(
    runtime: Runtime, namespace: str, metric: str, query: str, authorization: str | None = None
) -> bytes:
    """The ``ExternalMetricValueList`` body of ``metric`` for the workload ``query`` selects.

    Parameters
    ----------
    runtime : Runtime
        The app's runtime (its current snapshot is read).
    namespace, metric : str
        Path segments, as requested.
    query : str
        The raw (still encoded) query string.
    authorization : str or None
        The ``Authorization`` header: an unknown workload's 404 lists the configured ones
        only with the token (see :func:`_listed_to`).

    Raises
    ------
    UnknownMetricError, SelectorError, UnknownWorkloadError, ForecastUnavailableError
        404, 400, 404 (unknown, or configured in another namespace) and 503 (stale or
        missing forecast) respectively.
    """
    k8s.check_metric(metric, namespace)
    workload = workload_for_query(query)
    if runtime.namespaces.get(workload) != namespace:
        # A workload of another namespace answers as an unknown one: the namespace is what
        # the API server's RBAC grants, so it must not reach across.
        raise UnknownWorkloadError.of(
            workload, _listed_to(runtime, authorization), namespace=namespace
        )
    body = runtime.store.encoded.metric(workload, metric, datetime.now(UTC))
    if body is not None:
        return body
    # Never forecast or stale (or fresh again at the boundary): the checked path raises
    # with the reason, counts and logs the refusal, or returns a servable forecast.
    return encode_metric(runtime.forecast(workload, api="external_metrics"), metric)


@router.get(k8s.API_PATH)
def api_group_list() -> Response:
    """``APIGroupList``: the one group served."""
    return _json(_API_GROUP_LIST)


@router.get(k8s.GROUP_PATH)
def api_group() -> Response:
    """``APIGroup`` of ``external.metrics.k8s.io``."""
    return _json(_API_GROUP)


@router.get(k8s.VERSION_PATH)
def api_resource_list() -> Response:
    """``APIResourceList``: what the aggregator's availability check fetches."""
    return _json(_API_RESOURCE_LIST)


@router.get(
    k8s.METRIC_PATH,
    responses=schemas.responses(schemas.ExternalMetricValueList, 400, 404, 503),
    # Read from the raw query string (see metric_reply), so documented here, not declared.
    openapi_extra={"parameters": [schemas.LABEL_SELECTOR]},
)
def external_metric(
    namespace: str,
    metric: str,
    request: Request,
    runtime: RuntimeDep,
    authorization: Annotated[str | None, Header()] = None,
) -> Response:
    """``ExternalMetricValueList`` of one workload, picked by ``labelSelector=workload=NAME``.

    Errors are ``metav1.Status`` bodies: 400 for a malformed selector, 404 for an unknown
    metric or workload, 503 while the forecast is stale (the HPA then holds).
    """
    query = request.scope.get("query_string", b"").decode("latin-1")
    return _json(metric_reply(runtime, namespace, metric, query, authorization))
