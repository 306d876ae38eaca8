"""An A2A 0.3 JSON-RPC stream event that a2a-sdk's 0.3 transport would drop is an error.

a2a-sdk 1.3's ``CompatJsonRpcTransport`` reads a stream event by its ``kind``; it infers a
missing one of a task, message or status update, and skips every other event without a
word: an artifact update that leaves out its ``kind``, a kind A2A 0.3 does not define, a
result that is no object. A2A 0.3 defines no such event (a ``SendStreamingMessageResponse``
result is a task, message, status update or artifact update, each with its required
``kind``), so only a malformed agent sends one; the client now raises
:class:`InvalidAgentResponseError` where the caller saw a stream with a gap in it. Each
agent here is a real server on 127.0.0.1.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, InvalidAgentResponseError
from tests._support import running_server
from tests.client._stub_agent import StubAgent, card_for, sse_reply

WORKING = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "working"}}
ARTIFACT = {
    "taskId": "t-1",
    "contextId": "c-1",
    "artifact": {"artifactId": "a-1", "parts": [{"kind": "text", "text": "the result"}]},
}
DONE = {"taskId": "t-1", "contextId": "c-1", "final": True, "status": {"state": "completed"}}

#: what a malformed 0.3 agent sends mid-stream, and how the client names it
MALFORMED = {
    "artifact-without-kind": (ARTIFACT, "with no kind"),
    "unknown-kind": ({"kind": "progress-update", "taskId": "t-1"}, 'of kind "progress-update"'),
    "kind-not-a-string": (ARTIFACT | {"kind": ["artifact-update"]}, "of kind"),
    "null": (None, "that is no JSON object"),
    "array": ([ARTIFACT], "that is no JSON object"),
}

CALLS = {
    "stream_message": lambda c: c.stream_message("hi"),
    "resubscribe": lambda c: c.resubscribe("t-1"),
}


def _frames(*results: Any) -> tuple[int, dict[str, str], list[bytes]]:
    frames = [{"jsonrpc": "2.0", "id": 1, "result": result} for result in results]
    return sse_reply(*(f"data: {json.dumps(frame)}\n\n" for frame in frames))


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("case", MALFORMED)
async def test_an_event_the_sdk_would_drop_is_an_invalid_response(case: str, call: str) -> None:
    """Before: the stream read ``task``, then ``status-update`` completed; the event
    between them was lost unseen."""
    event, said = MALFORMED[case]
    reply = _frames(WORKING, event, DONE | {"kind": "status-update"})
    stub = StubAgent(rpc=lambda _b: reply)
    async with running_server(stub) as url:
        stub.card = card_for(url, "JSONRPC", "0.3")
        async with A2AClient(url, protocol="0.3") as client:
            events = CALLS[call](client)
            assert (await anext(events))["kind"] == "task"
            with pytest.raises(InvalidAgentResponseError, match=f"stream event {said}"):
                await anext(events)


async def test_events_whose_kind_the_sdk_infers_are_still_read() -> None:
    """A task and a status update without ``kind`` (older agents leave it out; the SDK
    infers it from ``id`` and ``taskId`` with ``final``), and a whole artifact update."""
    task = {k: v for k, v in WORKING.items() if k != "kind"}
    artifact = ARTIFACT | {"kind": "artifact-update"}
    stub = StubAgent(rpc=lambda _b: _frames(task, artifact, DONE))
    async with running_server(stub) as url:
        stub.card = card_for(url, "JSONRPC", "0.3")
        async with A2AClient(url, protocol="0.3") as client:
            events = [event async for event in client.stream_message("hi")]
    assert [e["kind"] for e in events] == ["task", "artifact-update", "status-update"]
    assert events[1]["artifact"]["parts"][0]["text"] == "the result"
    assert events[2]["status"]["state"] == "completed"
