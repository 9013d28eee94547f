"""The MLflow store's client, and a first look at whether a remote store answers at all.

MLflow retries a store it cannot reach with doubling waits (seven times by default, about four
minutes) and says nothing until it gives up: a command pointed at a mistyped host, or a nightly
job whose store is down, looked hung. One quick connection first names the problem at once;
MLflow's retries still run, so a store that is only restarting is waited for as before.
"""

from __future__ import annotations

import logging
import socket
import urllib.request
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from training.redaction import redact

if TYPE_CHECKING:
    from mlflow import MlflowClient

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0
"""Seconds the first look waits for a connection (a store on the same network takes ms)."""

_PORTS = {"http": 80, "https": 443}


def store_client(tracking_uri: str) -> MlflowClient:
    """A client of ``tracking_uri`` for runs and the registry, warning first if a remote
    store does not accept connections (see :func:`unreachable`)."""
    from mlflow import MlflowClient

    _look_once(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


@lru_cache(maxsize=16)  # once per store and process: serve asks again on every poll
def _look_once(tracking_uri: str) -> None:
    reason = unreachable(tracking_uri)
    if reason is not None:
        logger.warning(
            "MLflow store %r does not answer (%s): MLflow retries it up to %s times with "
            "doubling waits before this fails (MLFLOW_HTTP_REQUEST_MAX_RETRIES, "
            "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR: about 4 minutes by default)",
            redact(tracking_uri)[:200],
            reason,
            _retries(),
        )


def unreachable(tracking_uri: str) -> str | None:
    """Why an ``http(s)`` store refuses a TCP connection now, or None (it accepts one, it is
    not remote, or a proxy stands between: only MLflow's own request can tell then)."""
    parts = urlsplit(tracking_uri)
    scheme = parts.scheme.lower()
    if scheme not in _PORTS or not parts.hostname:
        return None
    host = parts.hostname
    if urllib.request.getproxies().get(scheme) and not urllib.request.proxy_bypass(host):
        return None
    try:
        port = parts.port or _PORTS[scheme]
    except ValueError:  # a port that is not a number: MLflow's own error names it
        return None
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
            return None
    except TimeoutError:
        return f"no connection to {host}:{port} within {PROBE_TIMEOUT:g} s"
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"


def _retries() -> str:
    """MLflow's retry count, as its variable sets it (a malformed one is MLflow's to name)."""
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES

    try:
        return str(int(MLFLOW_HTTP_REQUEST_MAX_RETRIES.get()))
    except ValueError:
        return "several"
