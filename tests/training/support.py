"""Helpers shared by the training tests."""

from __future__ import annotations

from typing import Any

from training.config import PrometheusSourceConfig
from training.sources.prometheus import PrometheusConfig


def prometheus_config(url: str, **settings: Any) -> PrometheusConfig:
    """The connection to ``url``: ``settings`` are fields of the ``source`` section, or the
    resolved ``bearer_token`` and ``basic_auth``."""
    secrets = {key: settings.pop(key) for key in ("bearer_token", "basic_auth") if key in settings}
    source = PrometheusSourceConfig(type="prometheus", url=url, **settings)
    return PrometheusConfig(source, **secrets)
