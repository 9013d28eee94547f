"""Routes of the Kubernetes External Metrics API (``external.metrics.k8s.io/v1beta1``).

Discovery documents are open to every caller (the kube-aggregator's availability check must
get a 2xx); a metric value is a snapshot read. The selector is decoded from the raw query
string, so ``+`` and percent-escapes are read exactly as Go's ``url.Values.Encode`` wrote them.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from serving import k8s
from serving.runtime import RuntimeDep
from serving.selector import WORKLOAD_LABEL, selector_from_query, workload_from_selector

__all__ = ["router"]

router = APIRouter(tags=["external metrics"])


def _json(document: k8s.JSONDict, status: int = 200) -> Response:
    return Response(k8s.encode_json(document), status_code=status, media_type=k8s.CONTENT_TYPE)


@router.get(k8s.API_PATH)
def api_group_list() -> Response:
    """``APIGroupList``: the one group served."""
    return _json(k8s.api_group_list())


@router.get(k8s.GROUP_PATH)
def api_group() -> Response:
    """``APIGroup`` of ``external.metrics.k8s.io``."""
    return _json(k8s.api_group())


@router.get(k8s.VERSION_PATH)
def api_resource_list() -> Response:
    """``APIResourceList``: what the aggregator's availability check fetches."""
    return _json(k8s.api_resource_list())


@router.get(k8s.METRIC_PATH)
def external_metric(namespace: str, metric: str, request: Request, runtime: RuntimeDep) -> Response:
    """``ExternalMetricValueList`` of one workload, picked by ``labelSelector=workload=NAME``.

    Errors are ``metav1.Status`` bodies: 400 for a malformed selector, 404 for an unknown
    metric or workload, 503 while the forecast is stale (the HPA then holds).
    """
    k8s.check_metric(metric, namespace)
    query = request.scope.get("query_string", b"").decode("latin-1")
    workload = workload_from_selector(selector_from_query(query))
    forecast = runtime.forecast(workload, api="external_metrics")
    value = (
        float(forecast.desired_replicas)
        if metric == k8s.METRIC_DESIRED_REPLICAS
        else forecast.forecast_demand
    )
    item = k8s.ExternalMetricValue(
        metric_name=metric,
        value=value,
        timestamp=forecast.generated_at,
        labels={WORKLOAD_LABEL: workload},
    )
    return _json(k8s.external_metric_value_list([item]))
