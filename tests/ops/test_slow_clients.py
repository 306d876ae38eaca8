"""Slow clients are bounded on HTTP (docs/deployment.md, *Slow clients*), through the real
``serve()`` path, with uvicorn's httptools protocol (installed here) and its h11 one
(httptools hidden, as without the ``speed`` extra).

A connection that sends nothing, or a request head that stops half-way (first, or after an
answer on a kept-alive connection), is closed after ``header_timeout``; a body that stops
half-way is answered 408 after ``body_timeout``. Normal traffic, a second request on a
kept-alive connection, a large body and a stream outlasting both deadlines are served.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests._support import TLS, without_packages
from tests.ops._agent import V1, message_params, streaming_body
from tests.ops._proc import serve_process

#: The deadlines under test (seconds): short, yet long enough for a busy machine's
#: normal requests.
BOUND = 2
#: How long a test waits for the server to close (or answer): a hang guard only.
GUARD = 30.0
_PARTIAL_HEAD = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture(scope="module", params=["httptools", "h11"])
def agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    env = None
    if request.param == "h11":
        env = without_packages(tmp_path_factory.mktemp("no-httptools"), "httptools")
    with serve_process(env, header_timeout=BOUND, body_timeout=BOUND) as (url, _proc):
        yield url


async def _connect(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (fails after GUARD)."""
    return await asyncio.wait_for(reader.read(), GUARD)


async def _answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One answer with a Content-Length: (head, body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head, await asyncio.wait_for(reader.readexactly(length), GUARD)


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def test_a_connection_that_sends_nothing_is_closed(agent: str) -> None:
    reader, writer = await _connect(agent)
    try:
        assert await _until_closed(reader) == b""
    finally:
        writer.close()


async def test_a_request_head_that_stops_is_closed(agent: str) -> None:
    reader, writer = await _connect(agent)
    try:
        writer.write(_PARTIAL_HEAD)
        await writer.drain()
        assert await _until_closed(reader) == b""
    finally:
        writer.close()


async def test_a_next_request_head_that_stops_after_an_answer_is_closed(agent: str) -> None:
    reader, writer = await _connect(agent)
    try:
        writer.write(_get("/health"))
        await writer.drain()
        head, _body = await _answer(reader)
        assert head.startswith(b"HTTP/1.1 200")
        writer.write(_PARTIAL_HEAD)  # then one byte now and then, each well within a bound
        await writer.drain()
        closed = asyncio.ensure_future(_until_closed(reader))
        for byte in b"X-Slow: 1":
            done, _ = await asyncio.wait({closed}, timeout=BOUND / 4)
            if done:
                break
            writer.write(bytes([byte]))
            await writer.drain()
        try:
            rest = await closed
        except ConnectionResetError:
            rest = b""  # closed as a byte of ours was on its way: the agent's kernel resets
        assert rest == b""
    finally:
        writer.close()


async def test_a_body_that_stops_is_answered_408(agent: str) -> None:
    reader, writer = await _connect(agent)
    try:
        writer.write(
            b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"A2A-Version: 1.0\r\nContent-Length: 100\r\n\r\n{}"
        )
        await writer.drain()
        answer = await _until_closed(reader)  # the answer, then the connection closes
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"connection: close" in answer.lower()


async def test_a_second_request_on_a_kept_alive_connection_is_served(agent: str) -> None:
    reader, writer = await _connect(agent)
    try:
        for _ in range(2):
            writer.write(_get("/.well-known/agent-card.json"))
            await writer.drain()
            head, body = await _answer(reader)
            assert head.startswith(b"HTTP/1.1 200")
            assert "skills" in json.loads(body)
    finally:
        writer.close()


async def test_a_large_body_sent_at_a_normal_pace_is_served(agent: str) -> None:
    text = "x" * 90_000
    payload = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        | {"params": message_params("ops.fail", {"text": text})}
    ).encode()

    async def chunks() -> AsyncIterator[bytes]:  # many reads on the server's side
        for start in range(0, len(payload), 8192):
            yield payload[start : start + 8192]
            await asyncio.sleep(0.005)

    async with httpx.AsyncClient(base_url=agent, timeout=GUARD, verify=TLS) as http:
        reply = await http.post(
            "/", content=chunks(), headers={**V1, "Content-Type": "application/json"}
        )
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"


async def test_a_stream_longer_than_both_deadlines_is_served(agent: str) -> None:
    body = streaming_body("ops.sleep", {"seconds": BOUND * 2.5})
    states: list[str] = []
    async with (
        httpx.AsyncClient(base_url=agent, timeout=GUARD, verify=TLS) as http,
        http.stream("POST", "/", json=body, headers=V1) as stream,
    ):
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                result = json.loads(line[5:])["result"]
                task = result.get("task") or result.get("statusUpdate") or {}
                if "status" in task:
                    states.append(task["status"]["state"])
    assert states[-1] == "TASK_STATE_COMPLETED", states


#: A header_timeout above uvicorn's own 5 s keep-alive, and the idle pause between two
#: requests in the test below: longer than 5 s, with room to spare below the bound.
PATIENT, IDLE = 30, 7


@pytest.fixture(scope="module")
def patient() -> Iterator[str]:
    with serve_process(header_timeout=PATIENT) as (url, _proc):
        yield url


async def test_a_kept_alive_connection_idles_for_header_timeout_not_uvicorns_5_s(
    patient: str,
) -> None:
    """A connection waits ``header_timeout`` for its next request head, as documented.
    uvicorn closed it after its own ``timeout_keep_alive`` (5 s) whatever the setting: a
    client keeping connections 5 s (httpx's default, the official a2a-sdk client's) sent
    its next request on a connection being closed about once in a hundred pauses of that
    length, and got ``ReadError`` for a request the agent never read."""
    reader, writer = await _connect(patient)
    try:
        for pause in (0, IDLE):
            await asyncio.sleep(pause)
            writer.write(_get("/.well-known/agent-card.json"))
            await writer.drain()
            head, _body = await _answer(reader)
            assert head.startswith(b"HTTP/1.1 200")
    finally:
        writer.close()
