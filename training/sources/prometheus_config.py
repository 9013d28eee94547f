"""Connection settings of :class:`~training.sources.prometheus.PrometheusSource`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from forecaster.exceptions import ConfigError

PROMETHEUS_MAX_POINTS = 11_000
"""Prometheus's hard limit of points per series in one ``query_range`` request."""


@dataclass(frozen=True)
class PrometheusConfig:
    """How to reach a Prometheus server.

    Parameters
    ----------
    url
        Base URL, e.g. ``"http://prometheus.monitoring:9090"`` (no ``/api/v1`` suffix).
    timeout
        Seconds to wait for the connection and for each read of the answer.
    retries
        Extra attempts after a connection error, a timeout or an HTTP 408/429/5xx answer.
        Client errors (bad query, 4xx) are not retried.
    backoff
        Seconds before the first retry; the delay doubles at each retry up to ``backoff_max``.
    backoff_max
        Longest delay between two attempts, in seconds.
    bearer_token
        Sent as ``Authorization: Bearer <token>``. Not shown in ``repr``.
    basic_auth
        ``(user, password)`` for HTTP basic auth. Not shown in ``repr``.
    ca_bundle
        PEM file of the CA that signed the server's certificate.
    insecure
        Skip TLS certificate verification (test clusters only).
    max_points_per_request
        Server limit on points per series and request (11,000 for Prometheus).
    point_margin
        Points kept below ``max_points_per_request`` so that rounding on either side never
        reaches the limit.
    method
        ``"POST"`` helps with very long queries behind proxies with URL length limits.
    """

    url: str
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5
    backoff_max: float = 30.0
    bearer_token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ca_bundle: Path | None = None
    insecure: bool = False
    max_points_per_request: int = PROMETHEUS_MAX_POINTS
    point_margin: int = 10
    method: Literal["GET", "POST"] = "GET"

    def __post_init__(self) -> None:
        if not re.match(r"^https?://[^/\s]+", self.url):
            raise ConfigError(f"`url` must start with http:// or https://, got {self.url!r}")
        if not self.timeout > 0:
            raise ConfigError(f"`timeout` must be positive seconds, got {self.timeout!r}")
        if self.retries < 0:
            raise ConfigError(f"`retries` must be >= 0, got {self.retries!r}")
        if self.backoff < 0 or self.backoff_max < self.backoff:
            raise ConfigError(
                "`backoff` must be >= 0 and `backoff_max` >= `backoff`, got "
                f"backoff={self.backoff!r}, backoff_max={self.backoff_max!r}"
            )
        if self.bearer_token is not None and self.basic_auth is not None:
            raise ConfigError("`bearer_token` and `basic_auth` are exclusive: set only one")
        if self.insecure and self.ca_bundle is not None:
            raise ConfigError("`insecure` and `ca_bundle` are exclusive: set only one")
        if self.max_points_per_request - self.point_margin < 2:
            raise ConfigError(
                "`max_points_per_request` - `point_margin` must be at least 2, got "
                f"{self.max_points_per_request!r} - {self.point_margin!r}"
            )
        if self.point_margin < 0:
            raise ConfigError(f"`point_margin` must be >= 0, got {self.point_margin!r}")
        if self.method not in ("GET", "POST"):
            raise ConfigError(f"`method` must be 'GET' or 'POST', got {self.method!r}")

    @property
    def points_per_chunk(self) -> int:
        """Grid points requested at most in one ``query_range`` call."""
        return self.max_points_per_request - self.point_margin
