"""Values for KEDA's external scaler messages: which workload, and how numbers are filled in.

KEDA reads ``MetricValue.metricValueFloat`` and ``MetricSpec.targetSizeFloat`` only when they
are ``> 0`` and otherwise falls back to the deprecated int64 fields (kedacore/keda
``pkg/scalers/external_scaler.go``: ``if spec.TargetSizeFloat > 0 {...} else
{GetMetricTarget(..., spec.TargetSize)}`` and ``value := float64(metricResult.MetricValue); if
metricResult.MetricValueFloat > 0 {value = metricResult.MetricValueFloat}``, since KEDA 2.17);
older KEDA reads only the int64 fields. So both are always set, and set so that an integer
reader never plans fewer replicas than the floats give (``ceil(value / target)``):

- a metric value's int is the float rounded **up** (``0.3`` -> ``1``);
- a target's int is the float rounded **down** (``2.5`` -> ``2``): a smaller target means more
  replicas. A target below 1 has no such integer; its int is ``0``, which KEDA never reads
  (the float is ``> 0``) and which an integer-only reader cannot use: the API server refuses
  an HPA target of 0 (``averageValue`` must be positive), so it fails loudly instead of
  planning 1 replica where the floats plan 21 (value 0.498, target 0.024);
- zero is sent as ``0`` / ``0.0``, the only way KEDA reads a zero.

The generated message classes come in as an argument (``pb2`` from
:func:`serving.wire.stubs.load_externalscaler`), so this module needs no generated code at import
time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from forecaster.exceptions import shown
from serving.exceptions import MetadataError, QuantityError

__all__ = ["WORKLOAD_KEY", "metric_spec", "metric_value", "workload_from_metadata"]

WORKLOAD_KEY = "workload"
"""The trigger ``metadata`` key that names the workload (``scalerMetadata.workload``)."""

_INT64_MAX = 2**63 - 1


def _checked(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise QuantityError(f"`{what}` must be a real number, got {value!r}")
    if not math.isfinite(value) or value < 0 or value > _INT64_MAX:
        raise QuantityError(f"`{what}` must be finite and in [0, 2**63 - 1], got {value!r}")
    return float(value)


def workload_from_metadata(metadata: Mapping[str, str], *, key: str = WORKLOAD_KEY) -> str:
    """Return the workload named in a ``ScaledObjectRef.scalerMetadata``.

    Parameters
    ----------
    metadata : mapping of str to str
        The trigger's metadata as KEDA passes it (``ref.scalerMetadata``).
    key : str, default "workload"
        The metadata key naming the workload.

    Returns
    -------
    str
        The workload name, stripped of surrounding whitespace (YAML block scalars add some).

    Raises
    ------
    MetadataError
        If the key is missing or blank (gRPC ``INVALID_ARGUMENT``); the message lists the
        keys that were present.
    """
    workload = metadata.get(key, "").strip()
    if not workload:
        present = shown(", ".join(sorted(metadata)) or "none")
        raise MetadataError(
            f"trigger metadata must set `{key}` to a workload name, got "
            f"{shown(metadata.get(key))} (keys present: {present})"
        )
    return workload


def metric_value(pb2: Any, metric_name: str, value: float) -> Any:
    """Build a ``MetricValue`` with the float and the deprecated int64 field both set.

    Parameters
    ----------
    pb2 : module
        The generated messages module (``load_externalscaler().pb2``).
    metric_name : str
        The metric name, as KEDA asked for it in ``GetMetricsRequest.metricName``.
    value : float
        Finite, ``>= 0``.

    Returns
    -------
    MetricValue
        ``metricValueFloat=value``, ``metricValue=ceil(value)``.

    Raises
    ------
    QuantityError
        If ``value`` is NaN, infinite, negative or beyond int64.
    """
    checked = _checked(value, "value")
    return pb2.MetricValue(
        metricName=metric_name, metricValue=math.ceil(checked), metricValueFloat=checked
    )


def metric_spec(pb2: Any, metric_name: str, target: float) -> Any:
    """Build a ``MetricSpec`` with the float and the deprecated int64 target both set.

    Parameters
    ----------
    pb2 : module
        The generated messages module (``load_externalscaler().pb2``).
    metric_name : str
        The metric name; KEDA prefixes ``s<index>-`` in the HPA and strips it again when it
        calls ``GetMetrics``.
    target : float
        The HPA target (``AverageValue`` by default); finite and ``> 0``.

    Returns
    -------
    MetricSpec
        ``targetSizeFloat=target``, ``targetSize=floor(target)`` (0 below 1, see the module
        docs).

    Raises
    ------
    QuantityError
        If ``target`` is not finite and ``> 0``.
    """
    checked = _checked(target, "target")
    if checked == 0:
        raise QuantityError(f"`target` must be > 0, got {target!r}")
    return pb2.MetricSpec(
        metricName=metric_name,
        targetSize=math.floor(checked),
        targetSizeFloat=checked,
    )
