"""A stream's slot comes back the moment its client hangs up, before its first event too.

The caller (``ip:127.0.0.1``, quota 2) opens a stream that sends nothing yet (a
message-reply skill's module still running, ``life.ponder``; a subscription resumed from
its task's latest event, ``life.gate``; a new task's first save waiting for a locked
SQLite store) or one whose client stopped reading, hangs up, and at once opens two
streams: both are served. Every streaming binding and version: JSON-RPC and REST over
real HTTP (httpx, raw sockets), gRPC (grpc.aio).

Before, the request guard watched a quiet stream's client only 50 ms after the stream
began, and gave its slot back once the stream was torn down: a caller streaming again
right after its hang-up found its slot still held (429). How often the first tests saw
that depended on how fast the client reconnected; the last one
(:func:`test_the_next_stream_sent_with_the_hang_up_is_served`) always does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict

from .._support import TLS, free_port
from ..bindings._grpc import stubs
from ._agent import Agent, agent_server
from ._client import V1, rpc, sse_events, wire_message
from .test_disconnect import _PONDER_03, PONDER_SHAPES, _grpc_address
from .test_resume_ids import _gated_task, _subscriptions

#: the caller's stream quota: after its hang-up it opens this many streams at once
QUOTA = 2
#: seconds a wait for what must follow at once may take (a hang guard, no more)
_GUARD = 30


async def _until(condition: Callable[[], Any], what: str) -> None:
    """Wait for *condition*, checked every loop turn (the agent runs in this loop), so a
    client can hang up the moment its stream has taken its slot."""
    try:
        async with asyncio.timeout(_GUARD):
            while not condition():
                await asyncio.sleep(0)
    except TimeoutError:
        raise AssertionError(what) from None


async def _hang_up(call: asyncio.Task[Any]) -> None:
    """End *call* as its client hanging up (httpx closes the connection)."""
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call


async def _streams_at_once(agent: Agent) -> list[int]:
    """Open :data:`QUOTA` ``life.gate`` streams at once, right away; their HTTP statuses."""
    body = rpc("SendStreamingMessage", {"message": wire_message("life.gate", {})})
    async with (
        contextlib.AsyncExitStack() as held,
        httpx.AsyncClient(base_url=agent.url, timeout=_GUARD, verify=TLS) as http,
    ):
        statuses = []
        for _ in range(QUOTA):  # each held open while the next opens
            answer = await held.enter_async_context(http.stream("POST", "/", json=body, headers=V1))
            statuses.append(answer.status_code)
        agent.probe.gate.set()  # every stream (and the hung-up run) ends
    return statuses


async def _http_stream(agent: Agent, path: str, body: Any, headers: dict[str, str]) -> None:
    async with (
        httpx.AsyncClient(base_url=agent.url, timeout=None, verify=TLS) as http,
        http.stream("POST", path, json=body, headers=headers) as answer,
    ):
        async for _event in sse_events(answer):
            pass


async def _ponder_grpc(agent: Agent, version: str) -> None:
    async with stubs(_grpc_address(agent)) as (v1, v03):
        if version == "1.0":
            body = {"message": wire_message("life.ponder", {})}
            call = v1.SendStreamingMessage(ParseDict(body, a2a_pb2.SendMessageRequest()))
        else:
            request = ParseDict({"request": _PONDER_03}, a2a_v0_3_pb2.SendMessageRequest())
            call = v03.SendStreamingMessage(request)
        try:
            async for _item in call:
                pass
        finally:
            call.cancel()  # the client hangs up: grpc.aio cancels the call


def _ponder(shape: str) -> Callable[[Agent], Awaitable[None]]:
    if shape.startswith("grpc-"):
        return lambda agent: _ponder_grpc(agent, shape.removeprefix("grpc-"))
    path, body = PONDER_SHAPES[shape]
    headers = {"A2A-Version": shape.rsplit("-", 1)[1]}
    return lambda agent: _http_stream(agent, path, body, headers)


@pytest.mark.parametrize("shape", [*sorted(PONDER_SHAPES), "grpc-1.0", "grpc-0.3"])
async def test_a_stream_whose_module_has_not_answered_gives_its_slot_back_on_hang_up(
    caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    settings: dict[str, Any] = {"max_streams_per_caller": QUOTA}
    if shape.startswith("grpc-"):
        settings["grpc_port"] = free_port()
    async with agent_server(caplog, **settings) as agent:
        stream = asyncio.create_task(_ponder(shape)(agent))
        # Hung up as soon as its slot is taken: anywhere before its first event.
        await _until(lambda: agent.state.streams.active == 1, "the stream was not served")
        await _hang_up(stream)
        assert await _streams_at_once(agent) == [200] * QUOTA
        await _until(lambda: agent.state.streams.active == 0, "stream slots still held")


#: in the order of ``_subscriptions`` (gRPC has no resume: a subscription answers at once)
_SUBSCRIPTIONS = ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"]


@pytest.mark.parametrize("shape", _SUBSCRIPTIONS)
async def test_a_resumed_subscription_still_waiting_gives_its_slot_back_on_hang_up(
    caplog: pytest.LogCaptureFixture, shape: str
) -> None:
    async with agent_server(caplog, max_streams_per_caller=QUOTA) as agent:
        async with httpx.AsyncClient(base_url=agent.url, timeout=_GUARD, verify=TLS) as http:
            task_id, last = await _gated_task(http)
        await _until(lambda: agent.state.streams.active == 0, "the task's own stream is held")
        path, headers, body = _subscriptions(task_id, last)[_SUBSCRIPTIONS.index(shape)]
        subscription = asyncio.create_task(_http_stream(agent, path, body, headers))
        await _until(lambda: agent.state.streams.active == 1, "the subscription was not served")
        await _hang_up(subscription)
        assert await _streams_at_once(agent) == [200] * QUOTA
        await _until(lambda: agent.state.streams.active == 0, "stream slots still held")


def _write_lock(path: str) -> sqlite3.Connection:
    """Another process's writer holding the SQLite write lock until it is closed."""
    holder = sqlite3.connect(path, timeout=0, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


async def test_a_stream_waiting_for_a_locked_sqlite_store_gives_its_slot_back_on_hang_up(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = str(tmp_path / "tasks.db")
    store = f"sqlite:///{path}"
    async with agent_server(caplog, task_store=store, max_streams_per_caller=QUOTA) as agent:
        body = rpc("SendStreamingMessage", {"message": wire_message("life.echo", {"text": "x"})})
        holder = _write_lock(path)  # the new task's first save waits for it
        try:
            stream = asyncio.create_task(_http_stream(agent, "/", body, V1))
            await _until(lambda: agent.state.streams.active == 1, "the stream was not served")
            await _hang_up(stream)
        finally:
            holder.rollback()
            holder.close()
        assert await _streams_at_once(agent) == [200] * QUOTA
        await _until(lambda: agent.state.streams.active == 0, "stream slots still held")
        # The store holds every task whole: the hung-up one ran on (a dropped stream's
        # task does by default) and the two gated ones ended once the gate opened.
        async with httpx.AsyncClient(base_url=agent.url, timeout=_GUARD, verify=TLS) as http:

            async def states() -> list[str]:
                listed = await http.post("/", json=rpc("ListTasks", {}), headers=V1)
                return sorted(t["status"]["state"] for t in listed.json()["result"]["tasks"])

            done = ["TASK_STATE_COMPLETED"] * (QUOTA + 1)
            async with asyncio.timeout(_GUARD):
                while await states() != done:
                    await asyncio.sleep(0.05)


async def test_a_stream_whose_client_stopped_reading_gives_its_slot_back_on_hang_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its client reads the first event and stops: the agent's 4 MiB wait on flow control
    # (the client's receive window is a few KiB), and the slot is held while the client
    # is connected (docs/lifecycle.md, slow readers); once it hangs up, the slot is back.
    async with agent_server(caplog, max_streams_per_caller=QUOTA) as agent:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", _port(agent)))
        reader, writer = await asyncio.open_connection(sock=sock)
        flood = {"chunks": 4, "size": 1 << 20}
        data = json.dumps(
            rpc("SendStreamingMessage", {"message": wire_message("life.flood", flood)})
        ).encode()
        head = (
            "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"A2A-Version: 1.0\r\ncontent-length: {len(data)}\r\n\r\n"
        )
        writer.write(head.encode() + data)
        seen = await reader.readuntil(b"\r\n\r\n")
        assert seen.startswith(b"HTTP/1.1 200"), seen
        while (found := re.search(rb'"task": ?\{"id": ?"([^"]+)"', seen)) is None:
            seen += await reader.read(1024)  # the first event: the submitted task
        task_id = found.group(1).decode()
        await _until(agent.probe.done(f"{task_id}:flooded").is_set, "the module did not flood")
        assert agent.state.streams.active == 1
        writer.close()  # hangs up with megabytes unread
        await writer.wait_closed()
        assert await _streams_at_once(agent) == [200] * QUOTA
        await _until(lambda: agent.state.streams.active == 0, "stream slots still held")


def _port(agent: Agent) -> int:
    return int(agent.url.rsplit(":", 1)[1])


def _raw_request(body: Any) -> bytes:
    data = json.dumps(body).encode()
    head = (
        "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"A2A-Version: 1.0\r\ncontent-length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def test_the_next_stream_sent_with_the_hang_up_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The agent runs in this loop: the hang-up and the next stream's request, written in
    # one step, reach it together, so its next look at its sockets sees both. Before,
    # the hung-up stream's client was watched only a moment after it began: 429.
    async with agent_server(caplog, max_streams_per_caller=1) as agent:
        ponder = rpc("SendStreamingMessage", {"message": wire_message("life.ponder", {})})
        gate = rpc("SendStreamingMessage", {"message": wire_message("life.gate", {})})
        _reader, hung = await asyncio.open_connection("127.0.0.1", _port(agent))
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(agent))
        hung.write(_raw_request(ponder))
        await _until(lambda: agent.state.streams.active == 1, "the stream was not served")
        hung.transport.abort()  # no await between: the agent sees both at its next turn
        writer.write(_raw_request(gate))
        status = await reader.readline()
        agent.probe.gate.set()
        writer.close()
        await writer.wait_closed()
        assert status.startswith(b"HTTP/1.1 200"), status
        await _until(lambda: agent.state.streams.active == 0, "stream slots still held")
