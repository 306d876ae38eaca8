"""A request head is bounded in size on HTTP (docs/deployment.md, *Slow clients*), through
the real ``serve()`` path, with uvicorn's httptools protocol (installed here) and its h11 one
(httptools hidden, as without the ``speed`` extra): the same bound, the same answer.

A head still incomplete after ``HEAD_LIMIT`` bytes (one long header, many 8 KB ones, a long
URL; first on its connection or after an answer) is answered 400 with ``Connection:
close`` and its connection closed; a 1 MiB header is never served. A head just within it,
8 KB ``Authorization`` headers (big JWTs) one request after another or pipelined, and
another connection's calls meanwhile are served. What a huge head costs the server's
memory is ``benchmarks/head_size.py``'s to measure.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from tests._support import without_packages
from tests.ops._proc import serve_process

#: Bytes a request head may take before it is complete (the documented bound).
HEAD_LIMIT = 16 * 1024
#: How long a test waits for the server to answer or close: a hang guard only.
GUARD = 30.0
_GET = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
_JWT = b"Authorization: Bearer " + b"a" * 8192 + b"\r\n"
_REFUSED = b"HTTP/1.1 400 "


@pytest.fixture(scope="module", params=["httptools", "h11"])
def agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    env = None
    if request.param == "h11":
        env = without_packages(tmp_path_factory.mktemp("no-httptools"), "httptools")
    # The time bound off: the size bound holds without it.
    with serve_process(env, header_timeout=0) as (url, _proc):
        yield int(url.rsplit(":", 1)[1])


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """One answer with a Content-Length: its head."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await asyncio.wait_for(reader.readexactly(length), GUARD)
    return head


async def _health(port: int, *extra: bytes) -> bytes:
    """The status line of ``GET /health`` (with *extra* header lines) on a new connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_GET + b"".join(extra) + b"\r\n")
        return (await _answer(reader)).split(b"\r\n", 1)[0]
    finally:
        writer.close()


def _over(start: bytes, filler: bytes) -> bytes:
    """A head, incomplete, of ``HEAD_LIMIT + 1`` bytes: what arrives is all the server has to
    read, so it closes cleanly after its answer (unread bytes would reset the connection)."""
    return (start + filler * (HEAD_LIMIT // len(filler) + 1))[: HEAD_LIMIT + 1]


_OVER = {
    "one header": _over(_GET + b"X-Big: ", b"a"),
    "8 KB headers": _over(_GET, b"X-Header: " + b"a" * 8000 + b"\r\n"),
    "request line": _over(b"GET /health?q=", b"a"),
}


@pytest.mark.parametrize("shape", [*_OVER, "after an answer"])
async def test_a_head_over_the_limit_is_answered_400_and_closed(agent: int, shape: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", agent)
    try:
        if shape == "after an answer":
            writer.write(_GET + b"\r\n")
            assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
        writer.write(_OVER.get(shape, _OVER["one header"]))
        answer = await asyncio.wait_for(reader.read(), GUARD)  # the answer, then EOF
    finally:
        writer.close()
    assert answer.startswith(_REFUSED), answer[:200]
    assert b"connection: close" in answer.lower()
    assert b"Invalid HTTP request received." in answer


async def test_a_one_mib_header_is_not_served(agent: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", agent)
    answer = b""
    try:  # the server refuses before reading it all: its close may reset the connection
        with contextlib.suppress(ConnectionError):
            writer.write(_GET + b"X-Big: " + b"a" * (64 * HEAD_LIMIT) + b"\r\n\r\n")
            await asyncio.wait_for(writer.drain(), GUARD)
        with contextlib.suppress(ConnectionError):
            answer = await asyncio.wait_for(reader.read(), GUARD)
    finally:
        writer.close()
    assert answer == b"" or answer.startswith(_REFUSED), answer[:200]
    assert await _health(agent) == b"HTTP/1.1 200 OK"  # the server serves on


async def test_a_head_within_the_limit_is_served_and_others_meanwhile(agent: int) -> None:
    padding = HEAD_LIMIT - len(_GET) - len(b"X-Pad: \r\n")
    reader, writer = await asyncio.open_connection("127.0.0.1", agent)
    try:
        writer.write(_GET + b"X-Pad: " + b"a" * padding + b"\r\n")  # HEAD_LIMIT bytes, then
        await writer.drain()
        assert await _health(agent, _JWT) == b"HTTP/1.1 200 OK"
        writer.write(b"\r\n")  # the blank line that ends it
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()


async def test_8kb_authorization_headers_are_served_one_after_another_and_pipelined(
    agent: int,
) -> None:
    request = _GET + _JWT + b"\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", agent)
    try:
        for _ in range(3):  # 24 KB of heads on one connection
            writer.write(request)
            assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
        # A second head whose start arrives with the first one, the rest later.
        writer.write(request + request[:9000])
        await writer.drain()
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
        writer.write(request[9000:])
        assert (await _answer(reader)).startswith(b"HTTP/1.1 200")
    finally:
        writer.close()
