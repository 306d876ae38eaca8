"""Slow and silent clients are bounded on the gRPC port as on HTTP (docs/grpc.md,
*Slow and silent clients*; ``server/grpc_deadlines.py``).

A socket that sends nothing, or half the HTTP/2 preface, is closed after
``header_timeout``, and so is a connection without calls (as HTTP closes one that sends no
request head); a call whose HEADERS came but whose request message never completes
ends ``DEADLINE_EXCEEDED`` after ``body_timeout`` (unary and streaming methods, A2A's and
the health service's). The hostile side is raw HTTP/2 (``tests/_h2raw.py``) where only
bytes can say it, and grpcio's own client (a request stream that never yields) where the
status must be read. A good client is served meanwhile, and an answer that outlasts both
bounds is not cut.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2

from tests._h2raw import GOAWAY, PREFACE, Peer, message, partial_message
from tests.bindings import _peers as sdk
from tests.bindings._agent import GATES, Agent, serve_agent
from tests.bindings._grpc import stubs
from tests.bindings._peers import data

#: The bounds under test (seconds): short, yet long enough for a busy machine's calls.
BOUND = 2
#: How long a test waits for the server to act: a hang guard only.
GUARD = 30.0
V1 = "/lf.a2a.v1.A2AService"
HEALTH = "/grpc.health.v1.Health"


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    with serve_agent(header_timeout=BOUND, body_timeout=BOUND) as served:
        yield served


def _port(agent: Agent) -> int:
    return int(agent.grpc_address.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    "sent", [b"", PREFACE[:10], PREFACE], ids=["nothing", "half-preface", "no-settings"]
)
async def test_a_connection_that_never_finishes_its_handshake_is_closed(
    agent: Agent, sent: bytes
) -> None:
    """Nothing, half the preface's magic, or the magic without the SETTINGS frame that
    completes a client's preface."""
    peer = await Peer.open("127.0.0.1", _port(agent))
    try:
        peer.send(sent)
        seen = await peer.until_closed(GUARD)
    finally:
        await peer.close()
    assert seen.closed


@pytest.mark.parametrize("calls", [0, 1], ids=["no-call", "after-a-call"])
async def test_a_connection_without_calls_is_closed(agent: Agent, calls: int) -> None:
    """The HTTP/2 preface and SETTINGS, then nothing (or one call, answered, then
    nothing): as an HTTP connection that sends no request head within ``header_timeout``
    of its opening or of its previous answer, it is sent GOAWAY and closed. The peer
    answers every PING, so keepalive cannot be what ends it."""
    port = _port(agent)
    peer = await Peer.open("127.0.0.1", port)
    try:
        peer.preface()
        if calls:
            peer.start_call(1, f"127.0.0.1:{port}", f"{HEALTH}/Check")
            peer.finish_call(1, message(b""))  # an empty HealthCheckRequest: all services
            assert 1 in (await peer.until_ended(1, GUARD)).finished
        seen = await peer.until_closed(GUARD)
    finally:
        await peer.close()
    assert seen.closed and GOAWAY in seen.kinds, seen


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_calls_racing_the_idle_close_are_all_answered(version: str) -> None:
    """The official client calls about as often as idle connections are closed (a short
    ``header_timeout``), so its calls keep meeting the server's GOAWAY (grpcio's: error
    INTERNAL_ERROR, last stream 0): each is answered, on the same channel, and the
    connection was closed under it more than once."""
    bound = 0.4  # also the handshake's bound: room for a busy machine
    channels: list[grpc.aio.Channel] = []
    closes = 0

    def channel_factory(address: str) -> grpc.aio.Channel:
        channels.append(grpc.aio.insecure_channel(address))
        return channels[-1]

    async def count_closes(channel: grpc.aio.Channel) -> None:
        nonlocal closes
        state = channel.get_state()
        while True:
            await channel.wait_for_state_change(state)
            state = channel.get_state()
            closes += state == grpc.ChannelConnectivity.IDLE

    with serve_agent(header_timeout=bound) as served:
        card = await sdk.fetch_card(served.url)
        client = sdk.make_client(card, "GRPC", version, channel_factory=channel_factory)
        peer = sdk.Peer("GRPC", version, client, client)
        watching: asyncio.Future[None] | None = None
        try:
            for i in range(30):
                answer = await sdk.send(peer, sdk.message(sdk.text(str(i)), skill="demo.echo"))
                assert answer.status.state == TaskState.TASK_STATE_COMPLETED
                if watching is None:
                    watching = asyncio.ensure_future(count_closes(channels[0]))
                # Pacing only: grpc closes a connection 1 to 2 bounds after its last call
                # (its idle timer re-arms), so the close and the next call meet here.
                await asyncio.sleep(random.uniform(0.8 * bound, 2.2 * bound))
        finally:
            if watching is not None:
                watching.cancel()
            await client.close()
    assert len(channels) == 1 and closes > 1, (len(channels), closes)


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
async def test_a_request_message_that_never_completes_ends_its_call(
    agent: Agent, method: str
) -> None:
    """HEADERS, then 10 bytes of a message announcing 1,000, and no END_STREAM: the call
    ends (trailers, or a reset), and the connection is still there for other calls."""
    port = _port(agent)
    peer = await Peer.open("127.0.0.1", port)
    try:
        peer.preface()
        peer.start_call(1, f"127.0.0.1:{port}", f"{V1}/{method}", partial_message(1000, 10))
        seen = await peer.until_ended(1, GUARD)
        assert seen.ended(1), seen
        assert GOAWAY not in seen.kinds and not seen.closed, "the call ended, not the connection"
    finally:
        await peer.close()
    # grpc's HPACK sends a first grpc-status as a literal: status 4 is DEADLINE_EXCEEDED.
    assert b"grpc-status\x014" in b"".join(seen.headers[1]), seen


async def _silent_requests() -> AsyncIterator[bytes]:
    """A request stream that never sends its message (nor ends)."""
    await asyncio.Event().wait()
    yield b""


async def _no_requests() -> AsyncIterator[bytes]:
    """A request stream that ends at once: HEADERS and END_STREAM, no message."""
    return
    yield b""


async def _raw_call(agent: Agent, path: str, requests: AsyncIterator[bytes]) -> grpc.StatusCode:
    """Call *path* with grpcio, sending *requests* as they come (bytes, unserialized); the
    status the call ends with."""
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        call = channel.stream_stream(path)(requests, metadata=(("a2a-version", "1.0"),))
        try:
            async with asyncio.timeout(GUARD):  # hang guard: the server never ending it
                async for _answer in call:
                    pass
        except grpc.aio.AioRpcError as exc:
            detail = exc.details() or ""
            assert "Traceback" not in detail and "/" not in detail, detail
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                assert detail == f"the request message did not arrive within {BOUND:g} s"
            return exc.code()
    raise AssertionError(f"{path} answered a call without a request")


@pytest.mark.parametrize(
    "path",
    [f"{V1}/SendMessage", f"{V1}/SendStreamingMessage", f"{V1}/GetTask", f"{HEALTH}/Check"],
)
async def test_a_call_whose_request_never_arrives_ends_deadline_exceeded(
    agent: Agent, path: str
) -> None:
    assert await _raw_call(agent, path, _silent_requests()) == grpc.StatusCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize("path", [f"{V1}/SendMessage", f"{HEALTH}/Check"])
async def test_a_call_without_a_request_message_is_invalid(agent: Agent, path: str) -> None:
    assert await _raw_call(agent, path, _no_requests()) == grpc.StatusCode.INVALID_ARGUMENT


def _send(skill: str, part: Part) -> a2a_pb2.SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[part])
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


async def test_good_clients_are_served_beside_stalled_calls(agent: Agent) -> None:
    """50 stalled calls open; a good client's unary call and stream are answered, and a
    stream whose answer takes longer than both bounds runs to its end."""
    stalled = [
        asyncio.ensure_future(_raw_call(agent, f"{V1}/SendMessage", _silent_requests()))
        for _ in range(50)
    ]
    key = uuid.uuid4().hex
    try:
        async with stubs(agent.grpc_address) as (v1, _v03):
            echoed = await v1.SendMessage(_send("demo.echo", Part(text="hi")), timeout=GUARD)
            assert echoed.task.status.state == TaskState.TASK_STATE_COMPLETED
            stream = v1.SendStreamingMessage(_send("demo.gate", data({"key": key})))
            states: list[Any] = []

            async def read() -> None:
                async for event in stream:
                    if event.HasField("task"):
                        states.append(event.task.status.state)
                    elif event.HasField("status_update"):
                        states.append(event.status_update.status.state)

            reading = asyncio.ensure_future(read())
            await GATES.wait_started(key)
            # Longer than header_timeout and body_timeout together: neither cuts an answer.
            await asyncio.sleep(2 * BOUND + 1)
            assert not reading.done()
            GATES.release(key)
            await asyncio.wait_for(reading, GUARD)
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
    finally:
        GATES.release(key)
        codes = await asyncio.gather(*stalled)
    assert set(codes) == {grpc.StatusCode.DEADLINE_EXCEEDED}
