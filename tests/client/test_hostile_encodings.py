"""A compressed answer cannot take the client's memory: it is inflated a bounded step at a
time and read up to the client's limits (docs/client.md, *Errors*).

Each agent is a real uvicorn server on 127.0.0.1 answering a body of about 12 kB in
``Content-Encoding: gzip, gzip`` that inflates to 1 GiB: httpx inflated each chunk it
received whole, so the client held the gigabyte (twice) before its limit was checked. The
memory the client allocates is traced (tracemalloc) and bounded far below the attack.
"""

from __future__ import annotations

import functools
import gzip
import json
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, A2ADiscoveryError, InvalidAgentResponseError
from apcore_a2a.client._bounded import MAX_ANSWER_BYTES
from apcore_a2a.client.card import MAX_CARD_BYTES
from tests._support import running_server
from tests.client._stub_agent import StubAgent

#: what the bomb inflates to
INFLATED = 1 << 30
MiB = 1 << 20


@functools.cache
def _bomb(start: bytes) -> bytes:
    """*start* then spaces up to :data:`INFLATED` bytes, gzipped twice (about 12 kB)."""
    inner = zlib.compressobj(1, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b" " * MiB
    deflated = [inner.compress(start)] + [inner.compress(block) for _ in range(INFLATED // MiB)]
    return gzip.compress(b"".join([*deflated, inner.flush()]), compresslevel=9)


class _Bombing:
    """Answers the card (*what* ``"card"``) or every POST with *body* in *coding*."""

    def __init__(self, what: str, media_type: str, body: bytes, coding: str) -> None:
        self.what, self.body = what, body
        self.asked: list[bytes | None] = []  # the Accept-Encoding of each request answered
        self.headers = [(b"content-type", media_type.encode()), (b"content-encoding", coding)]
        self.stub = StubAgent(card_paths=())  # no card: a pinned version posts to the URL

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        method = "GET" if self.what == "card" else "POST"
        if scope["type"] != "http" or scope["method"] != method:
            await self.stub(scope, receive, send)
            return
        while (await receive()).get("more_body"):
            pass
        self.asked.append(dict(scope["headers"]).get(b"accept-encoding"))
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


async def _peak(call: Callable[[], Awaitable[Any]], error: type[Exception], said: str) -> int:
    """The most memory the client allocated (traced) while *call* raised *error*."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(error, match=said):
            await call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("what", "media_type", "start", "error", "said", "bound"),
    [
        (
            "answer",
            "application/json",
            b'{"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": "t-1"',
            InvalidAgentResponseError,
            f"answer of .* larger than {MAX_ANSWER_BYTES}",
            4 * MAX_ANSWER_BYTES,
        ),
        (
            "event",
            "text/event-stream",
            b"data: ",
            InvalidAgentResponseError,
            f"an event of the stream .* larger than {MAX_ANSWER_BYTES}",
            4 * MAX_ANSWER_BYTES,
        ),
        (
            "card",
            "application/json",
            b'{"name": "x", "description": "',
            A2ADiscoveryError,
            f"larger than {MAX_CARD_BYTES}",
            4 * MAX_CARD_BYTES,
        ),
    ],
)
async def test_a_gzip_bomb_is_inflated_no_further_than_the_limit(
    what: str, media_type: str, start: bytes, error: type[Exception], said: str, bound: int
) -> None:
    agent = _Bombing(what, media_type, _bomb(start), b"gzip, gzip")
    async with running_server(agent) as url:
        protocol = "auto" if what == "card" else "1.0"
        async with A2AClient(url, protocol=protocol) as client:
            calls = {
                "answer": lambda: client.get_task("t-1"),
                "card": client.discover,
                "event": lambda: _drain(client.stream_message("hi")),
            }
            peak = await _peak(calls[what], error, said)
    assert peak < bound, f"{peak / MiB:.0f} MiB for an answer of {len(agent.body)} bytes"
    assert peak < INFLATED // 4


async def _drain(events: Any) -> None:
    async for _event in events:
        pass


TASK = {"jsonrpc": "2.0", "id": 1, "result": {"id": "t-1", "status": {"state": 3}}}


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        (b"gzip", gzip.compress(json.dumps(TASK).encode())),
        (b"deflate", zlib.compress(json.dumps(TASK).encode())),
        (b"deflate", zlib.compress(json.dumps(TASK).encode())[2:-4]),  # raw, as httpx reads it
        (b"identity, gzip", gzip.compress(json.dumps(TASK).encode())),
        (b"x-unknown", json.dumps(TASK).encode()),  # a coding httpx does not know is passed over
    ],
    ids=["gzip", "deflate", "raw-deflate", "identity-gzip", "unknown"],
)
async def test_an_answer_in_a_coding_the_client_asks_for_is_read(
    coding: bytes, body: bytes
) -> None:
    agent = _Bombing("answer", "application/json", body, coding)
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        assert (await client.get_task("t-1"))["id"] == "t-1"
    # Only what it inflates a step at a time (httpx adds br and zstd when their packages are
    # installed, and inflates those whole).
    assert agent.asked == [b"gzip, deflate"]


@pytest.mark.parametrize("coding", [b"br", b"zstd", b"gzip, br"])
async def test_an_answer_in_a_coding_the_client_did_not_ask_for_is_refused(coding: bytes) -> None:
    agent = _Bombing("answer", "application/json", json.dumps(TASK).encode(), coding)
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=r"content encoding (br|zstd)"):
            await client.get_task("t-1")
    card = _Bombing("card", "application/json", json.dumps({"name": "x"}).encode(), coding)
    async with running_server(card) as url, A2AClient(url) as client:
        with pytest.raises(A2ADiscoveryError, match=r"content encoding (br|zstd)"):
            await client.discover()
