"""One gRPC connection cannot pile up calls that never send their request, and a peer
that vanished does not hold its calls (docs/grpc.md, *Slow and silent clients*).

``grpc_max_pending_requests`` bounds the calls of one connection still waiting for their
request message: past it a new call is refused ``RESOURCE_EXHAUSTED`` at once, and each
waiting call frees its place when its message arrives, its client cancels it or
``body_timeout`` ends it. ``grpc_keepalive_time``/``_timeout`` end a connection whose peer
stops answering PINGs, and with it the stream slots its calls held.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import grpc.aio
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState, a2a_pb2, a2a_pb2_grpc

from tests._h2raw import Peer, message
from tests.bindings._agent import GATES, Agent, serve_agent
from tests.bindings._grpc import stubs
from tests.bindings._peers import data

#: The per-connection bound under test.
CAP = 8
#: Calls beyond it.
EXTRA = 4
#: How long a test waits for the server to act: a hang guard only.
GUARD = 30.0
V1 = "/lf.a2a.v1.A2AService"
#: grpc's HPACK sends a status the first time as a literal: 8 is RESOURCE_EXHAUSTED.
REFUSED = b"grpc-status\x018"
#: grpc_max_pending_requests' default
DEFAULT_CAP = 100
REFUSED_TEXT = f"this connection already has {CAP} calls waiting for their request message"


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    # body_timeout far beyond the guard: here a waiting call ends only if it is refused.
    with serve_agent(body_timeout=300, grpc_max_pending_requests=CAP) as served:
        yield served


def _port(agent: Agent) -> int:
    return int(agent.grpc_address.rsplit(":", 1)[1])


def _send(skill: str, part: Part) -> a2a_pb2.SendMessageRequest:
    msg = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[part])
    msg.metadata.update({"skillId": skill})
    return SendMessageRequest(message=msg)


def _echo() -> bytes:
    """A whole ``SendMessage`` request to ``demo.echo``, length-prefixed."""
    return message(_send("demo.echo", Part(text="hi")).SerializeToString())


async def _stalled(agent: Agent, count: int) -> tuple[Peer, list[int]]:
    """A raw connection with *count* ``SendMessage`` calls whose HEADERS came, nothing
    else; the connection and the calls' stream ids."""
    port = _port(agent)
    peer = await Peer.open("127.0.0.1", port)
    peer.preface()
    streams = [1 + 2 * i for i in range(count)]
    for stream in streams:
        peer.start_call(stream, f"127.0.0.1:{port}", f"{V1}/SendMessage")
    return peer, streams


async def _answered(peer: Peer, stream: int, port: int, *, new: bool = False) -> bool:
    """Send the echo request of *stream* (a *new* call: its HEADERS first) and wait for
    its end; whether it was answered (headers, message, trailers) rather than refused
    (trailers only)."""
    if new:
        peer.start_call(stream, f"127.0.0.1:{port}", f"{V1}/SendMessage")
    peer.finish_call(stream, _echo())
    seen = await peer.until_ended(stream, GUARD)
    assert seen.ended(stream) and not seen.closed, seen
    return len(seen.headers[stream]) == 2


async def _ended(peer: Peer, count: int) -> int:
    """Wait (at most GUARD) until *count* calls of *peer* have ended; how many did."""
    async with asyncio.timeout(GUARD):
        while len(peer.seen.finished | set(peer.seen.resets)) < count:
            await asyncio.sleep(0.05)
    return len(peer.seen.finished | set(peer.seen.resets))


async def test_calls_past_the_bound_are_refused_and_places_come_back(agent: Agent) -> None:
    """CAP + EXTRA calls wait on one connection: EXTRA are refused at once while a good
    client on another connection is served; a call whose message arrives, or that its
    client cancels, gives its place to a new call."""
    port = _port(agent)
    peer, streams = await _stalled(agent, CAP + EXTRA)
    try:
        assert await _ended(peer, EXTRA) == EXTRA
        assert REFUSED in b"".join(b"".join(h) for h in peer.seen.headers.values())
        waiting = [s for s in streams if not peer.seen.ended(s)]
        assert len(waiting) == CAP
        async with stubs(agent.grpc_address) as (v1, _v03):
            echoed = await v1.SendMessage(_send("demo.echo", Part(text="hi")), timeout=GUARD)
        assert echoed.task.status.state == TaskState.TASK_STATE_COMPLETED
        following = streams[-1] + 2
        # The bound is full: a whole call is refused too.
        assert not await _answered(peer, following, port, new=True)
        # A waiting call's message arrives: it is answered, and its place is free.
        assert await _answered(peer, waiting.pop(), port)
        assert await _answered(peer, following + 2, port, new=True)
        # A new call that waits fills the bound again...
        peer.start_call(following + 4, f"127.0.0.1:{port}", f"{V1}/SendMessage")
        assert not await _answered(peer, following + 6, port, new=True)
        # ... and a waiting call cancelled by its client frees its place.
        peer.cancel(waiting.pop())
        # The server frees the place once the cancel reaches the call's task, a moment
        # after the RST_STREAM: new calls are tried until one is answered (a leaked
        # place would refuse them all).
        answered, stream = False, following + 8
        for _ in range(50):
            answered = await _answered(peer, stream, port, new=True)
            if answered:
                break
            stream += 2
            await asyncio.sleep(0.1)
        assert answered
        assert not peer.seen.closed
    finally:
        await peer.close()


async def _silent_requests() -> AsyncIterator[bytes]:
    """A request stream that never sends its message (nor ends)."""
    await asyncio.Event().wait()
    yield b""


async def test_grpcio_sees_resource_exhausted_with_a_clear_message(agent: Agent) -> None:
    """The same through grpcio's client: the refused calls' status and text."""
    async with grpc.aio.insecure_channel(agent.grpc_address) as channel:
        method = channel.stream_unary(f"{V1}/SendMessage")
        calls = [
            method(_silent_requests(), metadata=(("a2a-version", "1.0"),))
            for _ in range(CAP + EXTRA)
        ]
        async with asyncio.timeout(GUARD):
            while sum(call.done() for call in calls) < EXTRA:
                await asyncio.sleep(0.05)
        refused = [call for call in calls if call.done()]
        assert len(refused) == EXTRA
        for call in refused:
            assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert await call.details() == REFUSED_TEXT
        for call in calls:
            call.cancel()


@pytest.fixture(scope="module")
def default_agent() -> Iterator[Agent]:
    """The default bound (100) and a short body_timeout."""
    with serve_agent(body_timeout=2) as served:
        yield served


async def test_calls_ended_by_body_timeout_give_their_places_back(default_agent: Agent) -> None:
    port = _port(default_agent)
    peer, streams = await _stalled(default_agent, DEFAULT_CAP)
    try:
        assert await _ended(peer, len(streams)) == len(streams)
        assert await _answered(peer, streams[-1] + 2, port, new=True)
    finally:
        await peer.close()


async def test_a_burst_of_50_calls_on_one_channel_is_served(default_agent: Agent) -> None:
    """A good client's concurrent calls send their messages at once: the default bound
    never refuses them."""
    async with stubs(default_agent.grpc_address) as (v1, _v03):
        answers = await asyncio.gather(
            *(
                v1.SendMessage(_send("demo.echo", Part(text=str(i))), timeout=GUARD)
                for i in range(50)
            )
        )
    assert {a.task.status.state for a in answers} == {TaskState.TASK_STATE_COMPLETED}


async def test_a_peer_that_stops_answering_pings_releases_its_stream() -> None:
    """A stream holds the caller's only slot; its peer then acknowledges no PING (it
    vanished without FIN or RST): the server ends the connection, and a new stream of the
    same caller is admitted."""
    with serve_agent(
        grpc_keepalive_time=1, grpc_keepalive_timeout=1, max_streams_per_caller=1
    ) as served:
        port = _port(served)
        held, waiting = uuid.uuid4().hex, uuid.uuid4().hex
        peer = await Peer.open("127.0.0.1", port)
        try:
            peer.preface()
            peer.start_call(1, f"127.0.0.1:{port}", f"{V1}/SendStreamingMessage")
            body = _send("demo.gate", data({"key": held})).SerializeToString()
            peer.finish_call(1, message(body))
            await GATES.wait_started(held)
            peer.answering_pings = False
            states = await _admitted_stream(served, waiting)
            assert states[-1] == TaskState.TASK_STATE_COMPLETED
            assert (await peer.until_closed(GUARD)).closed
        finally:
            GATES.release(held)
            GATES.release(waiting)
            await peer.close()


async def _admitted_stream(agent: Agent, key: str) -> list[int]:
    """Open a ``demo.gate`` stream until one is admitted (the caller's slot is taken
    until then), release it, and return the states it saw."""
    async with stubs(agent.grpc_address) as (v1, _v03), asyncio.timeout(GUARD):
        while True:
            states: list[int] = []
            stream = v1.SendStreamingMessage(_send("demo.gate", data({"key": key})))
            try:
                async for event in stream:
                    if event.HasField("task"):
                        states.append(event.task.status.state)
                        GATES.release(key)
                    elif event.HasField("status_update"):
                        states.append(event.status_update.status.state)
                return states
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                await asyncio.sleep(0.2)


async def test_a_client_that_pings_is_not_told_too_many_pings(agent: Agent) -> None:
    """A grpcio channel set to ping every 1.5 s, with or without data (as keepalive
    guides suggest), holds a quiet stream over several PINGs: grpc's server would take
    the third as abuse and end the connection (GOAWAY too_many_pings); it runs to its
    end."""
    key = uuid.uuid4().hex
    options = [
        ("grpc.keepalive_time_ms", 1500),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    try:
        async with grpc.aio.insecure_channel(agent.grpc_address, options=options) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            stream = stub.SendStreamingMessage(
                _send("demo.gate", data({"key": key})), metadata=(("a2a-version", "1.0"),)
            )
            states: list[int] = []

            async def read() -> None:
                async for event in stream:
                    if event.HasField("task"):
                        states.append(event.task.status.state)
                    elif event.HasField("status_update"):
                        states.append(event.status_update.status.state)

            reading = asyncio.ensure_future(read())
            await GATES.wait_started(key)
            await asyncio.sleep(6)  # four PINGs, and nothing else on the connection
            GATES.release(key)
            await asyncio.wait_for(reading, GUARD)
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
    finally:
        GATES.release(key)
