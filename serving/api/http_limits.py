"""Bounds on what one HTTP connection may send before it is answered.

Uvicorn's ``httptools`` protocol reads a request head (request line and headers) of any size
and waits for it forever: a client sending a 150 MiB header, or half a request and then
nothing, held the memory or the connection for as long as it liked. ``/healthz`` answers
without authentication, so any pod that reaches the port could exhaust the 1 GiB the deploy
gives the container. (``h11_max_incomplete_event_size`` would cap heads under the ``h11``
protocol, whose parsing cost about three times httptools' per request when measured here,
and bounds no time either.)

:func:`bounded_requests` extends the protocol with three bounds, checked as bytes arrive,
before the app sees the request:

- a head longer than :data:`MAX_HEAD_BYTES` answers 431 and the connection is closed;
- a request not received whole within :data:`READ_TIMEOUT` seconds of its first byte (or of
  the connection's opening) answers 408, or is closed if its head was complete;
- the unfinished heads of all connections together hold at most :data:`MAX_PENDING_HEAD_BYTES`:
  the connection whose bytes would pass it answers 503 and is closed.

A head that arrives in one read, as every autoscaler's, kubelet's and Prometheus' request
does, is parsed before it is counted and never takes any of the shared allowance.
"""

from __future__ import annotations

import asyncio
import http
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = [
    "MAX_HEAD_BYTES",
    "MAX_PENDING_HEAD_BYTES",
    "READ_TIMEOUT",
    "PendingHeads",
    "bounded_requests",
]

MAX_HEAD_BYTES = 64 * 1024
"""Longest request head taken, in bytes. The longest a client needs is the External Metrics
API's: a query string of up to 12,288 characters (the longest selector, percent-encoded) plus
the aggregator's headers."""

READ_TIMEOUT = 10.0
"""Seconds a client has to send a whole request once it has begun (or once it connected)."""

MAX_PENDING_HEAD_BYTES = 32 * 1024 * 1024
"""Bytes of unfinished request heads held at once across all connections: 512 heads at the
limit, far below the container's memory."""


class PendingHeads:
    """The bytes of unfinished request heads that all connections of one server hold.

    Parameters
    ----------
    limit : int
        Most bytes held at once.

    Examples
    --------
    >>> pending = PendingHeads(100)
    >>> pending.take(60), pending.take(60), pending.held
    (True, False, 60)
    >>> pending.give_back(60); pending.held
    0
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes, or say False when that would pass the limit."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        """Release ``size`` bytes taken before."""
        self.held -= size


def _response(code: int, message: str) -> bytes:
    """A complete plain-text response that closes the connection."""
    body = f"{message}\n".encode("ascii")
    head = (
        f"HTTP/1.1 {code} {http.HTTPStatus(code).phrase}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def bounded_requests(
    protocol: type[HttpToolsProtocol] = HttpToolsProtocol,
    *,
    max_head_bytes: int = MAX_HEAD_BYTES,
    read_timeout: float = READ_TIMEOUT,
    max_pending_head_bytes: int = MAX_PENDING_HEAD_BYTES,
) -> type[HttpToolsProtocol]:
    """A uvicorn ``httptools`` protocol class with the bounds of the module docs.

    Each call makes a new class, whose connections share one :class:`PendingHeads` (its
    ``pending`` attribute): give each server its own.

    Parameters
    ----------
    protocol : type, default HttpToolsProtocol
        The protocol to extend (its parser callbacks are httptools').
    max_head_bytes, read_timeout, max_pending_head_bytes
        The bounds (defaults: the module constants).
    """
    heads = PendingHeads(max_pending_head_bytes)
    too_large = _response(
        431, f"the request line and headers are longer than {max_head_bytes} bytes: refused"
    )
    too_slow = _response(408, f"the request was not received within {read_timeout:g} s: closed")
    busy = _response(503, "too many unfinished requests at once: retry")

    class BoundedProtocol(protocol):  # type: ignore[valid-type,misc]
        """Counts each head's bytes and times each request (see :func:`bounded_requests`)."""

        pending = heads

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._head_bytes = 0  # of the head being read; 0 once it is complete
            self._in_head = False  # from a request's first byte to the end of its headers
            self._in_body = False  # from the end of its headers to its last byte
            self._read_timer: asyncio.TimerHandle | None = None
            super().connection_made(transport)
            self._arm()  # a connection that sends nothing is closed too

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._release()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._arm()
            super().data_received(data)
            if not self._in_head or self.transport.is_closing():
                return
            # The head is unfinished after this read: the parser holds its bytes. A read
            # that began with the end of the previous request counts whole; the excess is
            # at most one read.
            if self._head_bytes + len(data) > max_head_bytes:
                self._refuse(too_large)
            elif heads.take(len(data)):
                self._head_bytes += len(data)
            else:
                self._refuse(busy)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head = True
            self._arm()  # a pipelined request that began in the previous one's read

        def on_headers_complete(self) -> None:
            self._in_head, self._in_body = False, True
            self._release()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_body = False
            self._disarm()

        # -- helpers ----------------------------------------------------------------------
        def _arm(self) -> None:
            if self._read_timer is None:
                self._read_timer = self.loop.call_later(read_timeout, self._timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _release(self) -> None:
            heads.give_back(self._head_bytes)
            self._head_bytes = 0

        def _timed_out(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            if self._in_body:
                # The app has the request and may have answered it: no room for a 408.
                self.transport.close()
            else:
                self._refuse(too_slow)

        def _answering(self) -> bool:
            cycle: Any = self.cycle
            return cycle is not None and not cycle.response_complete

        def _refuse(self, response: bytes) -> None:
            """Answer ``response`` (unless another answer is under way) and close."""
            if not self._answering():
                self.transport.write(response)
            self._release()
            self._in_head = False
            self.transport.close()

    BoundedProtocol.__name__ = f"Bounded{protocol.__name__}"
    return BoundedProtocol
