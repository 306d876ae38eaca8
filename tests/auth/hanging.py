"""A TCP endpoint that accepts connections, reads the request and never answers.

It stands in for a JWKS endpoint that hangs (an identity provider under load, a firewall
dropping packets after the handshake). It counts connections and knows how many are open,
so tests can wait for "the fetch is in flight" instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class HangingEndpoint:
    """Counts of one running hanging server."""

    url: str = ""
    connections: int = 0
    open: int = 0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def wait_open(self, count: int = 1, timeout: float = 60.0) -> None:
        """Return once at least *count* connections are open (or raise after *timeout*)."""
        deadline = time.monotonic() + timeout
        while self.open < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.open} open connections, expected {count}")
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def hanging_endpoint(path: str = "/.well-known/jwks.json") -> AsyncIterator[HangingEndpoint]:
    state = HangingEndpoint()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.open += 1
        state._writers.add(writer)
        try:
            while await reader.read(4096):
                pass  # never answer; wait until the peer gives up
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            state.open -= 1
            state._writers.discard(writer)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}{path}"
    try:
        yield state
    finally:
        for writer in list(state._writers):
            writer.close()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
