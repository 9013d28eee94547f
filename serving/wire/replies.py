"""Reply bodies encoded once per snapshot, so that answering a metric request is a lookup.

The HPA and KEDA ask for the same few values every 15-30 s, from many pods at once, while
the values change only when the refresher publishes a new snapshot. Building the JSON
document, writing the Quantity and encoding it per request would spend on every request
what can be spent once per snapshot.

A body is encoded when it is first read, then kept until the forecast changes. Encoding
every workload's bodies at publish would cost the same in all, but in one piece: at 10,000
workloads, most of a second of interpreter time in the refresher's thread, during which the
event loop waits for the interpreter lock at every request. Read by read, it costs tens of
microseconds on the request that first asks.

Freshness is still judged when a body is read: :meth:`Replies.metric` and
:meth:`Replies.keda` take the current time and return None once the data behind the
forecast is older than ``max_staleness``; the caller then goes through the checked path
(:meth:`serving.engine.snapshot.Snapshot.forecast`), which answers the 503 with its reason. A
stalled refresher therefore turns into 503s at read time, exactly as without the cache.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from serving.engine.snapshot import Snapshot, WorkloadForecast
from serving.wire import k8s
from serving.wire.selector import WORKLOAD_LABEL

__all__ = ["Replies", "encode_metric", "forecast_document"]

_AGE_MARK = "__prewarm_data_age__"
"""Placeholder for ``dataAgeSeconds`` (the only field that moves with the clock)."""


def forecast_document(forecast: WorkloadForecast, data_age_seconds: float | None) -> dict[str, Any]:
    """The KEDA JSON fields of one workload's forecast (camelCase, as KEDA users write paths).

    Parameters
    ----------
    forecast : WorkloadForecast
        The served forecast.
    data_age_seconds : float or None
        Age of the data behind it at answer time (None is written as 0).
    """
    return {
        "workload": forecast.workload,
        "desiredReplicas": forecast.desired_replicas,
        "forecastDemand": forecast.forecast_demand,
        "quantile": forecast.quantile,
        "leadTimeSeconds": forecast.lead_time_seconds,
        "generatedAt": k8s.format_time(forecast.generated_at),
        "origin": k8s.format_time(forecast.origin),
        "dataAgeSeconds": round(data_age_seconds or 0.0, 3),
        "modelVersion": forecast.model_version,
        "demandTarget": forecast.demand_target,
        "minReplicas": forecast.min_replicas,
        "maxReplicas": forecast.max_replicas,
    }


def encode_metric(forecast: WorkloadForecast, metric: str) -> bytes:
    """The ``ExternalMetricValueList`` body of ``metric`` (one of ``k8s.EXTERNAL_METRICS``)."""
    value = (
        float(forecast.desired_replicas)
        if metric == k8s.METRIC_DESIRED_REPLICAS
        else forecast.forecast_demand
    )
    item = k8s.ExternalMetricValue(
        metric_name=metric,
        value=value,
        timestamp=forecast.generated_at,
        labels={WORKLOAD_LABEL: forecast.workload},
    )
    return k8s.encode_json(k8s.external_metric_value_list([item]))


class _Bodies:
    """One workload's bodies, each encoded on its first read.

    Two threads reading the same body first may both encode it: each stores the same bytes,
    so the race costs one encoding and changes nothing.
    """

    __slots__ = ("_keda", "_metrics", "forecast")

    def __init__(self, forecast: WorkloadForecast) -> None:
        self.forecast = forecast
        self._metrics: dict[str, bytes] = {}
        self._keda: tuple[bytes, bytes] | None = None

    def metric(self, metric: str) -> bytes | None:
        """The ``ExternalMetricValueList`` body of ``metric``; None for an unknown metric."""
        body = self._metrics.get(metric)
        if body is None and metric in k8s.EXTERNAL_METRICS:
            body = self._metrics[metric] = encode_metric(self.forecast, metric)
        return body

    def keda(self) -> tuple[bytes, bytes]:
        """The KEDA document's bytes before and after the ``dataAgeSeconds`` value."""
        if self._keda is None:
            document = forecast_document(self.forecast, 0.0)
            document["dataAgeSeconds"] = _AGE_MARK
            head, _, tail = k8s.encode_json(document).partition(f'"{_AGE_MARK}"'.encode())
            self._keda = (head, tail)
        return self._keda


class Replies:
    """Every servable body of one snapshot, each encoded once, on its first read.

    Parameters
    ----------
    snapshot : Snapshot
        The snapshot whose forecasts are served (workloads without one get no entry).
    reuse : Replies or None
        The previous snapshot's replies: a forecast carried over unchanged (the same object:
        no new data, same model) keeps its bodies instead of being encoded again.

    A shadow snapshot gets no body at all: every request then takes the checked path, which
    refuses it.
    """

    def __init__(self, snapshot: Snapshot, reuse: Replies | None = None) -> None:
        self.max_staleness = snapshot.max_staleness
        self._entries: dict[str, _Bodies] = {}
        previous = reuse._entries if reuse is not None else {}
        if snapshot.shadow:
            return
        for name, state in snapshot.states.items():
            forecast = state.forecast
            if forecast is None or state.drift is not None:
                continue
            kept = previous.get(name)
            same = kept is not None and kept.forecast is forecast
            self._entries[name] = kept if same and kept is not None else _Bodies(forecast)

    def _fresh(self, workload: str, now: datetime) -> tuple[_Bodies, float] | None:
        entry = self._entries.get(workload)
        if entry is None:
            return None
        # The age as Snapshot.status computes it, so both agree to the microsecond.
        age = max(0.0, (now - entry.forecast.origin).total_seconds())
        return None if age > self.max_staleness else (entry, age)

    def metric(self, workload: str, metric: str, now: datetime) -> bytes | None:
        """The ``ExternalMetricValueList`` body, or None when not servable as cached.

        Parameters
        ----------
        workload, metric : str
            Names as requested.
        now : datetime
            The current time (tz-aware).

        Returns
        -------
        bytes or None
            None for an unknown workload or metric, no forecast, or data older than
            ``max_staleness`` at ``now``: the caller answers through the checked path.
        """
        found = self._fresh(workload, now)
        return None if found is None else found[0].metric(metric)

    def keda(self, workload: str, now: datetime) -> bytes | None:
        """The KEDA forecast document with ``dataAgeSeconds`` at ``now``, or None (see
        :meth:`metric`)."""
        found = self._fresh(workload, now)
        if found is None:
            return None
        entry, age = found
        head, tail = entry.keda()
        # json writes a float as its repr: splice exactly what encoding the document would.
        return head + repr(round(age, 3)).encode() + tail
