"""Optional bearer-token authentication of the KEDA metrics-api endpoints.

KEDA's ``metrics-api`` trigger sends ``Authorization: Bearer <token>`` when its
TriggerAuthentication has ``authMode: bearer``. The token is compared in constant time, so
the answer's timing says nothing about how much of a guess was right. Discovery, health and
``/metrics`` never require it: the kube-aggregator marks the APIService unavailable on any
401 from discovery.
"""

from __future__ import annotations

import hmac

from serving.exceptions import AuthenticationError

__all__ = ["TokenVerifier"]

_SCHEME = "bearer"


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
            raise AuthenticationError(
                "missing `Authorization` header: this endpoint needs "
                "`Authorization: Bearer <token>`"
            )
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() != _SCHEME or not credentials.strip():
            raise AuthenticationError(
                f"`Authorization` must use the Bearer scheme, got scheme {scheme!r}"
            )
        if not hmac.compare_digest(credentials.strip().encode("utf-8"), self._expected):
            raise AuthenticationError("invalid bearer token")
