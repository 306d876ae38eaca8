"""The uvicorn behaviour ``apcore_a2a/upstream/request_heads.py`` answers.

It has no deadline for a request head: a connection that sends nothing, or a partial head
(as its first request, or after an answer on a kept-alive connection), stays open, whatever
``timeout_keep_alive`` says. Its httptools protocol has no size bound for a request head:
a head of 1 MiB is served. A failure here means uvicorn bounds such connections (or such
heads, on httptools) itself: delete that part of the file.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests._support import running_server

#: uvicorn's keep-alive set short; the wait below is several times longer.
_KEEP_ALIVE = 1
_WAIT = 6.0
#: h11's default bound on an incomplete head (the agent's, on both protocols).
_HEAD_LIMIT = 16 * 1024
_PARTIAL = b"POST / HTTP/1.1\r\nHost: x\r\n"


async def _app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _open_after(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> bool:
    """Whether the connection is still open *_WAIT* seconds after what was written."""
    await writer.drain()
    try:
        await asyncio.wait_for(reader.read(), _WAIT)
    except TimeoutError:
        return True
    return False


@pytest.mark.parametrize("http", ["h11", "httptools"])
async def test_uvicorn_keeps_a_connection_with_a_partial_head_open(http: str) -> None:
    async with running_server(_app, http=http, timeout_keep_alive=_KEEP_ALIVE) as url:
        port = int(url.rsplit(":", 1)[1])
        idle_reader, idle = await asyncio.open_connection("127.0.0.1", port)
        first_reader, first = await asyncio.open_connection("127.0.0.1", port)
        after_reader, after = await asyncio.open_connection("127.0.0.1", port)
        try:
            first.write(_PARTIAL)
            after.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await after.drain()
            head = await asyncio.wait_for(after_reader.readuntil(b"\r\n\r\n"), 30)
            assert head.startswith(b"HTTP/1.1 200")
            await asyncio.wait_for(after_reader.readexactly(2), 30)  # the answer's body
            after.write(_PARTIAL)  # the next request's head starts, then stops
            still_open = await asyncio.gather(
                _open_after(idle, idle_reader),
                _open_after(first, first_reader),
                _open_after(after, after_reader),
            )
        finally:
            idle.close()
            first.close()
            after.close()
    assert still_open == [True, True, True]


async def test_uvicorn_serves_a_request_head_of_any_size_with_httptools() -> None:
    big = b"x" * (64 * _HEAD_LIMIT)
    async with running_server(_app, http="httptools") as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + big + b"\r\n\r\n")
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
        finally:
            writer.close()
    assert head.startswith(b"HTTP/1.1 200")
