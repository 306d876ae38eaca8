"""Tripwire of ``upstream/received_bytes.py``: httpcore 1.0.9 raises the same
``RemoteProtocolError`` when a server closes a kept connection without answering the
request on it and when it writes half a status line, then closes; only the bytes the
connection read tell them apart, which :func:`received` counts on :func:`counting`
transports.

The day httpcore tells them apart itself, ``test_httpcore_raises_the_same_error_for_both``
fails and the correction can go. Its effect on push deliveries (not sent again) is in
``tests/push/test_push_keepalive.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from apcore_a2a.upstream.received_bytes import counting, received
from tests._forward_proxy import forward_proxy
from tests._kept_server import EMPTY_OK

#: What the server writes for the second request on a connection before it closes it.
CLOSES = {"unanswered": b"", "half-a-status-line": b"HTTP/1.1 20"}


@contextlib.asynccontextmanager
async def _closing(last: bytes) -> AsyncIterator[str]:
    """A server answering each connection's first request, writing *last* for its second
    and closing."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            for answer in (EMPTY_OK, last):
                await reader.readuntil(b"\r\n\r\n")
                writer.write(answer)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


async def _second(transport: httpx.AsyncHTTPTransport, url: str) -> tuple[str, int]:
    """The error of a second GET on the kept connection, and the bytes read for it."""
    async with httpx.AsyncClient(transport=transport) as http:
        assert (await http.get(url)).status_code == 200
        with received() as answered, pytest.raises(httpx.RemoteProtocolError) as caught:
            await http.get(url)
        return str(caught.value), answered()


async def test_httpcore_raises_the_same_error_for_both() -> None:
    errors = []
    for last in CLOSES.values():
        async with _closing(last) as url:
            errors.append((await _second(httpx.AsyncHTTPTransport(), url))[0])
    assert errors == ["Server disconnected without sending a response."] * 2


@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "through-a-proxy"])
@pytest.mark.parametrize(("close", "read"), [("unanswered", 0), ("half-a-status-line", 11)])
async def test_the_bytes_read_before_the_close_are_counted(
    close: str, read: int, proxied: bool
) -> None:
    async with _closing(CLOSES[close]) as url, forward_proxy({}) as proxy:
        transport = httpx.AsyncHTTPTransport(proxy=proxy.url if proxied else None)
        assert (await _second(counting(transport), url))[1] == read
    assert len(proxy.asked) == proxied
