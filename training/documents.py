"""JSON documents written for people and programs: always valid JSON.

Python's :mod:`json` writes ``NaN`` and ``Infinity`` by default, which no strict parser
accepts. A metric that is not a finite number means "no value" in every report prewarm
writes, so :func:`finite` maps it to ``null`` and :func:`dumps` refuses anything left over.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (numpy's too) replaced by ``None``, recursively.

    Examples
    --------
    >>> finite({"rmse": float("inf"), "mase": [1.5, float("nan")]})
    {'rmse': None, 'mase': [1.5, None]}
    """
    if isinstance(value, float):  # numpy.float64 is a float
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0:
        return finite(value.item())  # a numpy scalar other than float64
    if isinstance(value, Mapping):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """:func:`json.dumps` of :func:`finite` ``(value)``, strict: never ``NaN``/``Infinity``.

    Examples
    --------
    >>> dumps({"rmse": float("inf")})
    '{"rmse": null}'
    """
    return json.dumps(finite(value), allow_nan=False, **kwargs)
