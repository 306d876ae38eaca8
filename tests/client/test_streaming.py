"""SSE handling: framing edge cases, error frames, where a stream ends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apcore_a2a.client import (
    A2AClient,
    A2AServerError,
    InvalidAgentResponseError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from tests.client._stub_agent import StubAgent, json_reply, rpc_error, sse_reply

STUB = "http://stub.local"


def frame(result: Any, *, event: str | None = None, split: bool = False) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, indent=1 if split else None)
    lines = "".join(f"data: {line}\r\n" for line in body.splitlines())
    return (f"event: {event}\r\n" if event else "") + lines + "\r\n"


def status(state: str, task_id: str = "t-1") -> dict[str, Any]:
    return {"statusUpdate": {"taskId": task_id, "contextId": "c-1", "status": {"state": state}}}


TASK = {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_SUBMITTED"}}}
ARTIFACT = {
    "artifactUpdate": {
        "taskId": "t-1",
        "contextId": "c-1",
        "artifact": {"artifactId": "a-1", "parts": [{"text": "chunk"}]},
        "append": True,
        "lastChunk": False,
    }
}


async def _collect(stub: StubAgent, protocol: str = "1.0") -> list[dict[str, Any]]:
    async with A2AClient(STUB, app=stub, protocol=protocol) as client:  # type: ignore[arg-type]
        return [e async for e in client.stream_message("go")]


async def test_keepalives_and_multiline_data_are_handled() -> None:
    stub = StubAgent(
        rpc=lambda _b: sse_reply(
            ": ping - 2026-01-01\r\n\r\n",
            frame(TASK, split=True),
            ": keepalive\r\n",
            frame(ARTIFACT, split=True),
            frame(status("TASK_STATE_COMPLETED")),
        )
    )
    events = await _collect(stub)
    assert [e["kind"] for e in events] == ["task", "artifact-update", "status-update"]
    assert events[1]["artifact"]["parts"][0]["text"] == "chunk"
    assert events[1]["append"] is True and events[1]["lastChunk"] is False
    assert events[2]["final"] is True
    assert stub.seen[-1].headers["accept"] == "text/event-stream"
    assert stub.seen[-1].headers["a2a-version"] == "1.0"
    assert stub.seen[-1].rpc_method == "SendStreamingMessage"


async def test_error_frame_after_events_raises_typed_error() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "kaboom"}}
    stub = StubAgent(
        rpc=lambda _b: sse_reply(frame(TASK), f"event: error\r\ndata: {json.dumps(error)}\r\n\r\n")
    )
    seen: list[dict[str, Any]] = []
    async with A2AClient(STUB, app=stub) as client:

        async def drain() -> None:
            async for event in client.stream_message("go"):
                seen.append(event)

        with pytest.raises(A2AServerError) as err:
            await drain()
    assert [e["kind"] for e in seen] == ["task"]
    assert (err.value.code, err.value.message) == (-32603, "kaboom")


async def test_error_frame_with_bare_error_object() -> None:
    stub = StubAgent(
        rpc=lambda _b: sse_reply('event: error\ndata: {"code": -32001, "message": "gone"}\n\n')
    )
    with pytest.raises(TaskNotFoundError):
        await _collect(stub)


async def test_error_in_data_frame_without_event_type() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32004, "message": "nope"}}
    stub = StubAgent(rpc=lambda _b: sse_reply(f"data: {json.dumps(error)}\n\n"))
    with pytest.raises(UnsupportedOperationError):
        await _collect(stub)


async def test_stream_stops_at_final_event() -> None:
    stub = StubAgent(
        rpc=lambda _b: sse_reply(
            frame(TASK),
            frame(status("TASK_STATE_INPUT_REQUIRED")),
            frame(status("TASK_STATE_WORKING")),
        )
    )
    events = await _collect(stub)
    assert [e["status"]["state"] for e in events] == ["submitted", "input-required"]
    assert events[-1]["final"] is True


async def test_stream_ends_when_server_closes_without_final() -> None:
    stub = StubAgent(rpc=lambda _b: sse_reply(frame(TASK), frame(status("TASK_STATE_WORKING"))))
    events = await _collect(stub)
    assert [e["kind"] for e in events] == ["task", "status-update"]
    assert events[-1]["final"] is False


async def test_a_message_ends_the_stream() -> None:
    # An event of no member the client knows is no longer skipped: test_stream_members.py.
    reply = {"message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}
    stub = StubAgent(rpc=lambda _b: sse_reply(frame(reply), frame(TASK)))
    events = await _collect(stub)
    assert [e["kind"] for e in events] == ["message"]
    assert events[0]["role"] == "agent"


async def test_plain_json_reply_to_a_stream_call() -> None:
    """An error object is the agent refusing the stream; a result is no stream (A2A 1.0.1
    §9.4.2), not its one event (tests/client/test_plain_stream_answers.py has every case)."""
    stub = StubAgent(rpc=lambda _b: rpc_error(-32001, "no such task"))
    with pytest.raises(TaskNotFoundError):
        await _collect(stub)
    plain = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": TASK}))
    with pytest.raises(InvalidAgentResponseError, match="not text/event-stream"):
        await _collect(plain)


async def test_invalid_json_in_a_frame() -> None:
    stub = StubAgent(rpc=lambda _b: sse_reply(frame(TASK), "data: {broken\n\n"))
    with pytest.raises(InvalidAgentResponseError):
        await _collect(stub)


async def test_v03_frames_use_kind_and_final() -> None:
    def v03(result: dict[str, Any]) -> str:
        return f"data: {json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': result})}\n\n"

    task = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "submitted"}}
    art = {
        "kind": "artifact-update",
        "taskId": "t-1",
        "contextId": "c-1",
        "artifact": {
            "artifactId": "a",
            "parts": [
                {
                    "kind": "data",
                    "data": {"value": [1, 2.5]},
                    "metadata": {"data_part_compat": True},
                },
                {
                    "kind": "file",
                    "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "h.txt"},
                },
            ],
        },
    }
    done = {
        "kind": "status-update",
        "taskId": "t-1",
        "contextId": "c-1",
        "status": {"state": "completed"},
        "final": True,
    }
    stub = StubAgent(rpc=lambda _b: sse_reply(v03(task), v03(art), v03(done), v03(task)))
    events = await _collect(stub, protocol="0.3")
    assert [e["kind"] for e in events] == ["task", "artifact-update", "status-update"]
    data_part, file_part = events[1]["artifact"]["parts"]
    assert data_part == {
        "type": "data",
        "data": [1, 2.5],
        "mediaType": None,
        "filename": None,
        "metadata": {},
    }
    assert file_part["type"] == "file" and file_part["raw"] == "aGk="
    assert (file_part["mediaType"], file_part["filename"]) == ("text/plain", "h.txt")
    assert stub.seen[-1].rpc_method == "message/stream"
