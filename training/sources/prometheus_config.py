"""Connection settings of :class:`~training.sources.prometheus.PrometheusSource`."""

from __future__ import annotations

from dataclasses import dataclass, field

from forecaster.exceptions import ConfigError
from training.config import PrometheusSourceConfig


@dataclass(frozen=True)
class PrometheusConfig:
    """How to reach a Prometheus server: the config file's ``source`` section and its secrets.

    Parameters
    ----------
    settings
        The validated ``source`` section (URL, timeout, retries and backoff, TLS, point limit,
        HTTP method); its ``bearer_token_*`` and ``basic_auth`` say where the secrets are.
    bearer_token
        Sent as ``Authorization: Bearer <token>``. Not shown in ``repr``.
    basic_auth
        ``(user, password)`` for HTTP basic auth. Not shown in ``repr``.

    Examples
    --------
    >>> settings = PrometheusSourceConfig(type="prometheus", url="http://127.0.0.1:9090")
    >>> PrometheusConfig(settings).points_per_chunk
    10990
    """

    settings: PrometheusSourceConfig
    bearer_token: str | None = field(default=None, repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.bearer_token is not None and self.basic_auth is not None:
            raise ConfigError("`bearer_token` and `basic_auth` are exclusive: set only one")

    @property
    def points_per_chunk(self) -> int:
        """Grid points requested at most in one ``query_range`` call."""
        return self.settings.max_points_per_request - self.settings.point_margin
