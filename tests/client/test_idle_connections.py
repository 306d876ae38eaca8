"""The client drops a connection idle for 4 s, before a server's 5 s keep-alive (uvicorn's,
Node's) closes it: a request sent as the server closes its connection is lost with
``ReadError``, and a call (a POST) is not sent again. httpx keeps idle connections 5 s,
the same as those servers: about once in a hundred pauses of that length the call failed.
The server here is a bare HTTP/1.1 server on 127.0.0.1 that counts the connections it
accepts and never closes one itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from apcore_a2a.client import A2AClient

from ._stub_agent import card_for

#: Longer than the client's 4 s, shorter than the servers' 5 s.
PAUSE = 4.5


class _Counting:
    def __init__(self) -> None:
        self.accepted = 0
        self.base = ""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        body = json.dumps(card_for(self.base, "JSONRPC", "1.0")).encode()
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + b"content-length: %d\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[_Counting]:
    counting = _Counting()
    listening = await asyncio.start_server(counting.serve, "127.0.0.1", 0)
    counting.base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    async with listening:
        yield counting


@pytest.mark.parametrize(("pause", "connections"), [(0, 1), (PAUSE, 2)])
async def test_a_connection_idle_past_4_s_is_not_used_again(
    server: _Counting, pause: float, connections: int
) -> None:
    async with A2AClient(server.base) as client:
        await client.discover(refresh=True)
        await asyncio.sleep(pause)
        await client.discover(refresh=True)
    assert server.accepted == connections
