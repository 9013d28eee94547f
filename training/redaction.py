"""Credential removal for text that leaves the process (errors, logs, ``/readyz``).

A source's error may quote a URL, a request's headers or a server's answer. :func:`redact`
takes out what authenticates: the ``user:password@`` of a URL, ``Bearer``/``Basic`` tokens,
``Authorization`` header values, credential query parameters, and any secret the caller
knows (a configured token or password), wherever it appears.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "***"

# `scheme://userinfo@host`: userinfo is whatever precedes the first '@' before the path.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#'\"]*@")
# An Authorization header as text ("Authorization: x"), JSON or a dict repr ('Authorization': 'x').
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\r\n,}]+",
    re.IGNORECASE,
)
_SCHEME_TOKEN = re.compile(r"(?P<key>\b(?:bearer|basic)\s+)[A-Za-z0-9\-._~+/]+=*", re.IGNORECASE)
_SECRET_PARAM = re.compile(
    r"(?P<key>[?&;\s](?:password|passwd|pwd|token|access_token|api_key|apikey|secret)=)[^&\s'\"#]+",
    re.IGNORECASE,
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential replaced by ``***``.

    Parameters
    ----------
    text
        Anything about to be raised, logged or served.
    secrets
        Known secret values (a bearer token, a password) removed wherever they occur;
        ``None`` and empty strings are skipped.

    Examples
    --------
    >>> redact("cannot connect to http://bob:s3cret@prom:9090/api")
    'cannot connect to http://***@prom:9090/api'
    >>> redact("{'Authorization': 'Bearer abc.def'}")
    "{'Authorization': '***'}"
    >>> redact("login failed for hunter2", secrets=["hunter2"])
    'login failed for ***'
    """
    # Longest first, so a secret containing another one is removed whole.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _URL_USERINFO.sub(rf"\g<scheme>{MASK}@", text)
    text = _AUTH_HEADER.sub(rf"\g<key>{MASK}", text)
    text = _SCHEME_TOKEN.sub(rf"\g<key>{MASK}", text)
    return _SECRET_PARAM.sub(rf"\g<key>{MASK}", text)


def redact_document(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with :func:`redact` applied to
    every string in it, keys included.

    Examples
    --------
    >>> redact_document({"source": {"url": "http://bob:s3cret@prom:9090"}, "step": 60})
    {'source': {'url': 'http://***@prom:9090'}, 'step': 60}
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_document(k): redact_document(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_document(v) for v in value]
    return value
