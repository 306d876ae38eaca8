"""A stream request answered with no stream: the client says so, never an empty stream.

A2A 1.0.1 answers ``SendStreamingMessage`` and ``SubscribeToTask`` with ``200`` and
``text/event-stream`` (JSON-RPC §9.4.2, REST §11), on 1.0 as on 0.3. Each agent here is
a real server on 127.0.0.1 answering such a request otherwise: a JSON-RPC error object as
plain JSON (how agents refuse a stream before it starts: its typed error), a result as
plain JSON, an empty ``200``, an HTML page with ``200`` (a proxy's), an SSE stream that
closes before its first event. Before, a2a-sdk's transports read a plain answer as at most
one event and an empty stream as a finished one: the caller saw a stream end normally.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, InvalidAgentResponseError, TaskNotFoundError
from tests._support import cli, running_server
from tests.client._stub_agent import (
    NOT_FOUND,
    TASK,
    TASK_03,
    AnsweringAgent,
    Reply,
    StubAgent,
    card_for,
    json_reply,
    sse_reply,
)

RPC_NOT_FOUND = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no such task"}}
HTML = b"<html><body><h1>Service Unavailable</h1>try again later</body></html>"


def _result(binding: str, version: str) -> Any:
    """A completed task as the result of a stream event: read as an event, it would end
    the stream normally."""
    task = TASK_03 if version == "0.3" else {"task": TASK}
    return {"jsonrpc": "2.0", "id": 1, "result": task} if binding == "JSONRPC" else task


def _unknown(binding: str) -> Any:
    event = {"kind": "progress-update", "progressUpdate": {"taskId": "t-1"}}
    return {"jsonrpc": "2.0", "id": 1, "result": event} if binding == "JSONRPC" else event


def _answer(case: str, binding: str, version: str) -> Reply:
    rest = binding == "HTTP+JSON"
    answers: dict[str, Reply] = {
        # JSON-RPC: the error object, as agents refuse a stream; REST: the Status in a 404
        "error": json_reply({"error": NOT_FOUND}, 404) if rest else json_reply(RPC_NOT_FOUND),
        # REST: the same Status under a 200 (a proxy's rewrite): the error it names
        "error-200": json_reply({"error": NOT_FOUND} if rest else RPC_NOT_FOUND),
        "result": json_reply(_result(binding, version)),
        "empty": (200, {"content-type": "application/json"}, [b""]),
        "no-type": (200, {}, [b""]),
        "html": (200, {"content-type": "text/html; charset=utf-8"}, [HTML]),
        "no-events": sse_reply(": keep-alive\n\n", "event: ping\n\n"),
        # events of a kind no A2A version defines (a newer agent's), and nothing else
        "unknown-events": sse_reply(f"data: {json.dumps(_unknown(binding))}\n\n"),
    }
    return answers[case]


def _agent(case: str, binding: str, version: str) -> AnsweringAgent:
    return AnsweringAgent(answer=_answer(case, binding, version))


#: case: what the caller gets, and what its message says
EXPECTED: dict[str, tuple[type[Exception], str]] = {
    "error": (TaskNotFoundError, "no such task"),
    "error-200": (TaskNotFoundError, "no such task"),
    "result": (InvalidAgentResponseError, "application/json, not text/event-stream"),
    "empty": (InvalidAgentResponseError, "application/json, not text/event-stream"),
    "no-type": (InvalidAgentResponseError, "no content type, not text/event-stream"),
    "html": (InvalidAgentResponseError, "text/html; charset=utf-8, not text/event-stream"),
    "no-events": (InvalidAgentResponseError, "stream ended before its first event"),
    # a2a-sdk's 0.3 REST transport refuses such an event itself, the client a 0.3 JSON-RPC
    # one (which the SDK would drop: test_stream_kinds_03.py) and a 1.0 one (which the SDK
    # reads as empty: test_stream_members.py)
    "unknown-events": (
        InvalidAgentResponseError,
        "no member A2A 1.0 defines|Unsupported StreamR|no A2A 0.3 task",
    ),
}

CALLS = {
    "stream_message": lambda c: c.stream_message("hi"),
    "resubscribe": lambda c: c.resubscribe("t-1"),
}


async def _drain(events: Any) -> list[dict[str, Any]]:
    return [event async for event in events]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("case", EXPECTED)
@pytest.mark.parametrize(
    ("binding", "version"),
    [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")],
)
async def test_a_stream_request_answered_without_a_stream_is_a_typed_error(
    binding: str, version: str, case: str, call: str
) -> None:
    stub = _agent(case, binding, version)
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, version)
        async with A2AClient(url, protocol=version) as client:
            expected, said = EXPECTED[case]
            with pytest.raises(expected, match=said) as raised:
                await _drain(CALLS[call](client))
    assert type(raised.value) is expected
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_stream_of_events_is_still_read_whole(version: str) -> None:
    """The checks above do not touch an agent that streams: each event, in order."""
    working_03 = {"kind": "status-update", "taskId": "t-1", "contextId": "c-1", "final": False}
    working_03 |= {"status": {"state": "working"}}
    working = {"statusUpdate": {"taskId": "t-1", "contextId": "c-1", "status": {"state": 2}}}
    first = working_03 if version == "0.3" else working
    frames = [{"jsonrpc": "2.0", "id": 1, "result": r} for r in (first,)]
    frames.append(_result("JSONRPC", version))
    reply = sse_reply(*(f"data: {json.dumps(f)}\n\n" for f in frames))
    stub = StubAgent(rpc=lambda _b: reply)
    async with running_server(stub) as url:
        stub.card = card_for(url, "JSONRPC", version)
        async with A2AClient(url, protocol=version) as client:
            events = await _drain(client.stream_message("hi"))
    assert [(e["kind"], e["status"]["state"]) for e in events] == [
        ("status-update", "working"),
        ("task", "completed"),
    ]


#: the CLI's one line for each answer to ``call --stream`` (exit 1: the agent's A2A error)
CLI_CASES = {
    "error": "TaskNotFoundError (-32001): no such task",
    "result": "InvalidAgentResponseError (-32006): the agent answered a stream request",
    "html": "InvalidAgentResponseError (-32006): the agent answered a stream request",
    "no-events": "InvalidAgentResponseError (-32006): the agent's stream ended before",
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "wait"])
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("case", CLI_CASES)
async def test_the_cli_says_the_stream_is_none_in_one_line(
    case: str, binding: str, stream: bool
) -> None:
    """``call --stream``, and ``call`` (which streams to an agent that can): exit 1, one
    line, as for any invalid answer (before: exit 0 and no output, or "the agent's stream
    ended without a task")."""
    stub = _agent(case, binding, "1.0")
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, "1.0")
        command = ["call", url, "--text", "hi", *(["--stream"] if stream else [])]
        exit_code, out, err = await cli(*command)
    assert (exit_code, out) == (1, ""), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: {CLI_CASES[case]}"), err
