"""Bounds on what one HTTP connection may send, over raw sockets to a real uvicorn server: an
oversized request head is refused without its bytes being held, a request that never ends
is closed, and unfinished heads together hold a bounded amount of memory."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from serving.api.app import create_app, uvicorn_config
from serving.api.http_limits import MAX_HEAD_BYTES, bounded_requests
from serving.api.runtime import ServingComponents
from serving.settings import ServingSettings
from tests.serving.support import (
    DictRegistry,
    FrameSource,
    fit_planner,
    free_port,
    history,
    refresh_config,
    running,
    specs,
    wait_until,
)

pytestmark = pytest.mark.integration

LEVELS = {"chat": 40.0}
MIB = 1024 * 1024
HEAD = b"GET /healthz HTTP/1.1\r\nHost: prewarm\r\n"
"""A request head cut before its end (no blank line): the server waits for the rest."""


@contextmanager
def _server(**overrides: Any) -> Iterator[int]:
    """A real app under uvicorn (``overrides`` to its uvicorn config); yields the port."""
    frame = history(LEVELS, pd.Timestamp.now(tz="UTC"), 200)
    registry = DictRegistry("prewarm-test")
    registry.add(fit_planner(frame, specs(LEVELS)))
    settings = ServingSettings(port=free_port(), grpc_port=None)
    config = refresh_config(LEVELS, max_staleness=3600.0)
    app = create_app(settings, ServingComponents(config, lambda: FrameSource(frame), registry))
    with running(app, lambda a: uvicorn_config(a, settings, **overrides)):
        yield settings.port


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset ends it too)."""
    parts = []
    try:
        while part := sock.recv(65536):
            parts.append(part)
    except ConnectionResetError:
        pass
    return b"".join(parts)


def _rss() -> int:
    """This process's resident memory, in bytes (the server runs in it)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


def _send_header(port: int, size: int) -> tuple[int, bytes]:
    """Send a head with one ``size``-byte header that never ends; return the bytes of it the
    server took before closing the connection (``size`` if it never did) and its answer."""
    block = b"a" * MIB
    sent = 0
    with _connect(port) as sock:
        sock.sendall(HEAD + b"X-Big: ")
        try:
            while sent < size:
                sock.sendall(block)  # blocks while the server reads; fails once it closed
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            return sent, _answer(sock)
        return sent, b""


def _send_at_the_limit(port: int) -> None:
    """A head just under the limit, in many reads, is served, and so is the next request."""
    with _connect(port) as sock:
        sock.sendall(HEAD)
        header = b"X-Big: " + b"a" * (MAX_HEAD_BYTES - len(HEAD) - 200) + b"\r\n\r\n"
        for start in range(0, len(header), 4096):
            sock.sendall(header[start : start + 4096])
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        sock.sendall(HEAD + b"\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


def test_an_oversized_header_is_refused_and_its_bytes_are_not_held() -> None:
    """The reported case: three connections each sending a 150 MiB header took the server
    from 341 to 923 MiB, and a 200 MiB header was answered 200."""
    size = 32 * MIB
    with _server() as port, ThreadPoolExecutor(3) as pool:
        _send_at_the_limit(port)
        before = _rss()
        results = list(pool.map(lambda _: _send_header(port, size), range(3)))
        grown = _rss() - before
    for sent, answer in results:
        # What the kernel buffers on both sides is sent before the close is seen.
        assert sent < 16 * MIB, f"{sent / MIB:.0f} MiB of the header taken"
        # The 431 comes first, unless the close's reset (unread bytes) overtook it.
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert grown < 16 * MIB, f"the server grew by {grown / MIB:.0f} MiB"


def test_requests_that_never_end_are_closed() -> None:
    """The reported case: 50 partial requests stayed open for as long as their clients."""
    timeout = 2.0
    with _server(http=bounded_requests(read_timeout=timeout)) as port, ExitStack() as stack:
        silent = [stack.enter_context(_connect(port)) for _ in range(10)]
        partial = [stack.enter_context(_connect(port)) for _ in range(30)]
        for sock in partial:
            sock.sendall(HEAD)
        slow_body = [stack.enter_context(_connect(port)) for _ in range(10)]
        for sock in slow_body:
            sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: p\r\nContent-Length: 1000\r\n\r\nab")
        # Each socket waits 30 s at most for the server's next bytes.
        for sock in silent + partial:
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
            assert b"not received within 2 s" in answer
        for sock in slow_body:
            # The app answered the head (405: no POST); the body never ended: closed.
            assert _answer(sock).startswith(b"HTTP/1.1 405 ")


def test_unfinished_heads_share_a_bounded_allowance() -> None:
    protocol = bounded_requests(max_pending_head_bytes=4 * MAX_HEAD_BYTES)
    pending = protocol.pending
    part = HEAD + b"X-Big: " + b"a" * (MAX_HEAD_BYTES - 1000)
    with _server(http=protocol) as port, ExitStack() as stack:
        held = []
        for count in range(1, 5):
            sock = stack.enter_context(_connect(port))
            sock.sendall(part)
            held.append(sock)
            wait_until(lambda count=count: pending.held == count * len(part))
        with _connect(port) as fifth:
            fifth.sendall(part)
            answer = _answer(fifth)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert pending.held == 4 * len(part)
        # A request that arrives whole takes none of it: still served.
        with _connect(port) as whole:
            whole.sendall(HEAD + b"\r\n")
            assert whole.recv(65536).startswith(b"HTTP/1.1 200 ")
        for sock in held:
            sock.close()
        wait_until(lambda: pending.held == 0)
