"""The uvicorn behaviour ``apcore_a2a/upstream/stalled_connections.py`` answers: a
stopping server waits for a connection whose client reads nothing until
``timeout_graceful_shutdown``, then cancels the app (ERROR "timeout graceful shutdown
exceeded"); it never cuts the connection itself. A failure of the first test means
uvicorn cuts it: delete that file. The second shows what the correction reads and does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from apcore_a2a.upstream.stalled_connections import peer, stalled
from tests._support import free_port

#: How long a test waits for the server: a hang guard only.
GUARD = 30.0


async def _endless(scope: Any, receive: Any, send: Any) -> None:
    """Sends 64 KiB chunks for as long as its client takes them, until it is gone."""
    if scope["type"] != "http":
        return
    await receive()  # the request
    gone = asyncio.ensure_future(receive())  # http.disconnect
    await send({"type": "http.response.start", "status": 200, "headers": []})
    try:
        while not gone.done():  # a send to a client gone returns at once: look each time
            await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
            await asyncio.sleep(0)
    finally:
        gone.cancel()


def _stop_reading(port: int) -> socket.socket:
    """A client that reads its answer's first bytes, then nothing, and does not close."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(GUARD)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    return sock


@contextlib.asynccontextmanager
async def _stalled_server(http: str, bound: int) -> AsyncIterator[uvicorn.Server]:
    """A server whose one connection's client stopped reading; stopped on leaving."""
    port = free_port()
    config = uvicorn.Config(
        _endless, host="127.0.0.1", port=port, http=http, lifespan="off", log_config=None
    )
    config.timeout_graceful_shutdown = bound
    server = uvicorn.Server(config)
    serving = asyncio.ensure_future(server.serve())
    async with asyncio.timeout(GUARD):
        while not server.started:
            await asyncio.sleep(0.01)
    sock = await asyncio.to_thread(_stop_reading, port)
    try:
        async with asyncio.timeout(GUARD):  # its bytes wait: the socket buffers are full
            while not list(stalled(server)):
                await asyncio.sleep(0.02)
        yield server
        server.should_exit = True
        async with asyncio.timeout(GUARD):
            await serving
    finally:
        sock.close()
        server.should_exit = server.force_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(serving, GUARD)


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_uvicorn_waits_for_a_client_that_reads_nothing(
    http: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    async with _stalled_server(http, bound=1):
        pass
    assert "timeout graceful shutdown exceeded" in caplog.text, caplog.text


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_the_correction_cuts_it(http: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    async with _stalled_server(http, bound=600) as server:
        [transport] = stalled(server)
        assert peer(transport).startswith("127.0.0.1:")
        transport.abort()
    assert "timeout graceful shutdown exceeded" not in caplog.text, caplog.text
    assert "Exception in ASGI application" not in caplog.text, caplog.text
