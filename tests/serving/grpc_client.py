"""A gRPC channel that sends ``authorization: Bearer <token>`` with every call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def _with_token(self, details: Any) -> Any:
        return details._replace(metadata=(*(details.metadata or ()), *self.metadata))

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)


def with_token(channel: grpc.Channel, token: str) -> grpc.Channel:
    """``channel``, adding the bearer token to every unary and server-streaming call."""
    return grpc.intercept_channel(channel, _Bearer(token))
