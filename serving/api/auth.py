"""Who may call: the kube-aggregator on the External Metrics API, KEDA on its endpoints.

The External Metrics API is called by the kube-aggregator only, with its front-proxy client
certificate (:class:`FrontProxyVerifier`); authorization happened in the kube-apiserver
before it proxied the request (docs/serving.md, "Authentication").

KEDA's ``metrics-api`` trigger sends ``Authorization: Bearer <token>`` when its
TriggerAuthentication has ``authMode: bearer``. The token is compared in constant time, so
the answer's timing says nothing about how much of a guess was right. Discovery, health and
``/metrics`` never require it: the kube-aggregator marks the APIService unavailable on any
401 from discovery.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

from serving.exceptions import AuthenticationError

__all__ = [
    "FrontProxyVerifier",
    "TokenVerifier",
    "client_common_names",
    "recording_client_certificates",
]

_SCHEME = "bearer"
_EXPECTED = "this endpoint needs `Authorization: Bearer <token>`"
# Where a connection's client certificate names travel in the ASGI scope's `state`.
_STATE_KEY = "prewarm.client_common_names"


class TokenVerifier:
    """Checks ``Authorization`` headers against one configured token.

    Parameters
    ----------
    token : str or None
        The expected token; None turns authentication off.

    Examples
    --------
    >>> TokenVerifier("s3cret").check("Bearer s3cret")
    >>> TokenVerifier(None).check(None)
    """

    def __init__(self, token: str | None) -> None:
        self._expected = token.encode("utf-8") if token else None

    @property
    def enabled(self) -> bool:
        """Whether a token is required."""
        return self._expected is not None

    def check(self, authorization: str | None) -> None:
        """Accept the header or raise.

        Parameters
        ----------
        authorization : str or None
            The ``Authorization`` header value, as received.

        Raises
        ------
        AuthenticationError
            If a token is required and the header is missing, not a bearer token, or wrong
            (HTTP 401). The message never echoes the token received.
        """
        if self._expected is None:
            return
        if not authorization:
            raise AuthenticationError(f"missing `Authorization` header: {_EXPECTED}")
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() != _SCHEME or not credentials.strip():
            # Nothing of the value is echoed, not even its first word: a token sent without
            # the scheme (`Authorization: s3cret`) would come back whole.
            raise AuthenticationError(f"`Authorization` is not a bearer token: {_EXPECTED}")
        if not hmac.compare_digest(credentials.strip().encode("utf-8"), self._expected):
            raise AuthenticationError("invalid bearer token")


class FrontProxyVerifier:
    """Checks that an External Metrics API request came through the kube-aggregator.

    The kube-apiserver authenticates and authorizes the HPA controller (or any caller) for
    ``external.metrics.k8s.io`` before its aggregator proxies the request here, over TLS with
    the front-proxy client certificate (``--proxy-client-cert-file``). The TLS handshake
    has already verified a presented certificate against the front-proxy CA
    (``requestheader-client-ca-file``, the ``client_ca`` setting); this check requires one
    on the metric paths and, as kube-apiserver's request-header authenticator does, its
    common name to be one of ``requestheader-allowed-names`` when that list is non-empty.

    Parameters
    ----------
    required : bool
        Whether a client certificate is required (the ``client_ca`` setting is set).
    allowed_names : sequence of str, default ()
        Common names accepted; empty accepts any certificate the front-proxy CA signed.

    Examples
    --------
    >>> FrontProxyVerifier(True, ["front-proxy-client"]).check(("front-proxy-client",))
    >>> FrontProxyVerifier(False).check(None)
    """

    def __init__(self, required: bool, allowed_names: Sequence[str] = ()) -> None:
        self.required = required
        self.allowed_names = frozenset(allowed_names)

    def check(self, common_names: Sequence[str] | None) -> None:
        """Accept the connection's client certificate or raise.

        Parameters
        ----------
        common_names : sequence of str or None
            The subject common names of the verified client certificate; None when the
            client presented none.

        Raises
        ------
        AuthenticationError
            If a certificate is required and missing, or its name is not allowed (HTTP 401).
        """
        if not self.required:
            return
        if common_names is None:
            raise AuthenticationError(
                "no client certificate: the External Metrics API answers the kube-aggregator, "
                "which presents its front-proxy client certificate"
            )
        if self.allowed_names and not self.allowed_names.intersection(common_names):
            shown = ", ".join(repr(name[:100]) for name in common_names) or "none"
            raise AuthenticationError(
                f"client certificate common name {shown} is not one of "
                f"requestheader-allowed-names ({', '.join(sorted(self.allowed_names))})"
            )


def client_common_names(scope: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The common names of the request's verified client certificate (None: none presented).

    Read from what :func:`recording_client_certificates` stores in the ASGI scope's ``state``.
    """
    state = scope.get("state") or {}
    names: tuple[str, ...] | None = state.get(_STATE_KEY)
    return names


def _common_names(certificate: Mapping[str, Any]) -> tuple[str, ...]:
    # getpeercert(): subject is a tuple of RDNs, each a tuple of (attribute, value) pairs.
    return tuple(
        value for rdn in certificate.get("subject", ()) for key, value in rdn if key == "commonName"
    )


def recording_client_certificates(protocol: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """A uvicorn HTTP protocol class that records each connection's client certificate.

    Uvicorn puts nothing of the peer's certificate into the ASGI scope, but each of its HTTP
    protocols copies its ``app_state`` into every request's ``scope["state"]``. The subclass
    gives each TLS connection its own copy of that mapping with the verified certificate's
    common names (None when none was presented), for :func:`client_common_names`.

    A resumed TLS session is closed at once: it skipped the handshake's checks and brings
    back the client certificate verified against the client CA of its day, which may since
    have been replaced (the way a leaked client key is revoked). The listener issues no
    session tickets (:meth:`~serving.api.certificates.ServingCertificate.follow`), so only
    a TLS 1.2 session-ID resumption gets here, which the aggregator's, KEDA's and
    Prometheus's Go clients never attempt; a client that does reconnects in full.

    Parameters
    ----------
    protocol : type
        The uvicorn HTTP protocol to extend (``httptools`` or ``h11``).
    """

    class ClientCertificateProtocol(protocol):  # type: ignore[valid-type,misc]
        app_state: dict[str, Any]  # set by uvicorn's protocols in __init__

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            ssl_object = transport.get_extra_info("ssl_object")
            if ssl_object is not None and ssl_object.session_reused:
                transport.close()  # nothing read from it, nothing sent
                return
            certificate = ssl_object.getpeercert() if ssl_object is not None else None
            names = None if not certificate else _common_names(certificate)
            self.app_state = {**self.app_state, _STATE_KEY: names}

    ClientCertificateProtocol.__name__ = f"ClientCertificate{protocol.__name__}"
    return ClientCertificateProtocol
