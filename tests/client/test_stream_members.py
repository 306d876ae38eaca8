"""A 1.0 stream event is read as A2A 1.0.1 says, on every binding alike.

A ``StreamResponse`` holds exactly one of ``task``, ``message``, ``statusUpdate`` and
``artifactUpdate`` (§3.2.3, §4.3.3); fields a receiver does not know are ignored (§5.7).
So a member this client does not know beside a known one, or inside it, is read past; an
event with no member it knows is no event: :class:`InvalidAgentResponseError`, as a 0.3
event of no known kind is (``test_stream_kinds_03.py``). Before, a2a-sdk's transports
read it as an empty ``StreamResponse`` and the client skipped it without a word: a gap in
the stream no one saw. Each agent here is a real server on 127.0.0.1: a raw ASGI agent
under uvicorn for JSON-RPC and HTTP+JSON, a ``grpc.aio`` server for gRPC.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb

from apcore_a2a.client import A2AClient, InvalidAgentResponseError
from tests._support import running_server
from tests.client._stub_agent import StubAgent, card_for, sse_reply
from tests.client.test_hostile_grpc_agent import _grpc_agent, _task, _working

WORKING = {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}}
DONE = {
    "statusUpdate": {
        "taskId": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_COMPLETED"},
    }
}
#: a member of a newer A2A, which this client does not know
NEWER = {"progressUpdate": {"taskId": "t-1", "percent": 50}}
#: field 99 of a StreamResponse, a varint (what a newer A2A's member reads as in protobuf)
NEWER_FIELD = bytes([99 << 3 & 0x7F | 0x80, 99 >> 4, 1])
#: what the client says of such an event
NO_MEMBER = r"stream event with no member A2A 1\.0 defines"


def _http_agent(binding: str, *results: Any) -> StubAgent:
    frames = [
        {"jsonrpc": "2.0", "id": 1, "result": result} if binding == "JSONRPC" else result
        for result in results
    ]
    reply = sse_reply(*(f"data: {json.dumps(frame)}\n\n" for frame in frames))
    return StubAgent(rpc=lambda _b: reply)


async def _http_events(binding: str, *results: Any) -> list[dict[str, Any]]:
    stub = _http_agent(binding, *results)
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, "1.0")
        async with A2AClient(url, timeout=30) as client:
            return [event async for event in client.stream_message("hi")]


def _with_newer_field(event: pb.StreamResponse) -> pb.StreamResponse:
    return pb.StreamResponse.FromString(event.SerializeToString() + NEWER_FIELD)


async def _grpc_events(*events: pb.StreamResponse) -> list[dict[str, Any]]:
    async def sent() -> AsyncIterator[pb.StreamResponse]:
        for event in events:
            yield event

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.events = sent
        return [event async for event in client.stream_message("hi")]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_event_of_no_known_member_is_an_invalid_response(binding: str) -> None:
    with pytest.raises(InvalidAgentResponseError, match=NO_MEMBER):
        await _http_events(binding, WORKING, NEWER, DONE)


async def test_an_event_of_no_known_member_is_an_invalid_response_over_grpc() -> None:
    with pytest.raises(InvalidAgentResponseError, match=NO_MEMBER):
        await _grpc_events(
            pb.StreamResponse(task=_task(pb.TASK_STATE_WORKING)),
            pb.StreamResponse.FromString(NEWER_FIELD),
            pb.StreamResponse(task=_task()),
        )


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_unknown_fields_of_a_known_event_are_ignored(binding: str) -> None:
    done = {"statusUpdate": DONE["statusUpdate"] | {"newer": True}} | NEWER
    events = await _http_events(binding, WORKING, done)
    assert [e["kind"] for e in events] == ["task", "status-update"]
    assert events[1]["status"]["state"] == "completed"


async def test_unknown_fields_of_a_known_event_are_ignored_over_grpc() -> None:
    events = await _grpc_events(_with_newer_field(_working()), pb.StreamResponse(task=_task()))
    assert [e["status"]["state"] for e in events] == ["working", "completed"]
