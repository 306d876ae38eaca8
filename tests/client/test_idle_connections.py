"""The client drops a connection idle for 4 s, before a server's 5 s keep-alive (uvicorn's,
Node's) closes it: a request sent as the server closes its connection is lost with
``ReadError``, and a call (a POST) is not sent again. httpx keeps idle connections 5 s,
the same as those servers: about once in a hundred pauses of that length the call failed.
The server here is a bare HTTP/1.1 server on 127.0.0.1 (`tests/_kept_server.py`) that counts
the connections it accepts and never closes one itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from apcore_a2a.client import A2AClient
from tests._kept_server import KeptServer, json_ok

from ._stub_agent import card_for

#: Longer than the client's 4 s, shorter than the servers' 5 s.
PAUSE = 4.5


@pytest.fixture
async def server() -> AsyncIterator[tuple[KeptServer, str]]:
    kept = KeptServer()
    listening = await asyncio.start_server(kept.serve, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    kept.reply = json_ok(json.dumps(card_for(base, "JSONRPC", "1.0")).encode())
    async with listening:
        yield kept, base


@pytest.mark.parametrize(("pause", "connections"), [(0, 1), (PAUSE, 2)])
async def test_a_connection_idle_past_4_s_is_not_used_again(
    server: tuple[KeptServer, str], pause: float, connections: int
) -> None:
    kept, base = server
    async with A2AClient(base) as client:
        await client.discover(refresh=True)
        await asyncio.sleep(pause)
        await client.discover(refresh=True)
    assert kept.connections == connections
