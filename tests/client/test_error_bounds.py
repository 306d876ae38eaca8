"""An agent's error cannot make the client hold, log or show megabytes of its words.

Each agent here is a real server on 127.0.0.1 answering an error whose message (or
``data``, or ``details``) runs to a megabyte: a JSON-RPC error with HTTP 200, a REST error
status, an ``event: error`` in the middle of a stream. The client raises the error's typed
class with its code, the message cut at ``MAX_MESSAGE_CHARS`` saying how long it was, and
``data`` dropped past ``MAX_DATA_CHARS`` (docs/client.md, *Errors*). A task's own status
content is the caller's data, never cut: our real agent's answer keeps it whole.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apcore_a2a.client import (
    A2AClient,
    A2ADiscoveryError,
    A2AServerError,
    InvalidAgentResponseError,
    InvalidParamsError,
    TaskBusyError,
    TaskNotFoundError,
)
from apcore_a2a.client.errors import MAX_DATA_CHARS, MAX_MESSAGE_CHARS
from tests._support import running_server
from tests.client._apcore_agent import build_our_app
from tests.client._stub_agent import (
    NOT_FOUND,
    AnsweringAgent,
    StubAgent,
    card_for,
    json_reply,
    rpc_error,
    sse_reply,
)

MEGABYTE = 1024 * 1024
CUT = f"... (cut: {MEGABYTE} characters)"
DROPPED = f" (its data, over {MAX_DATA_CHARS} characters of JSON, not kept)"


def _held(error: BaseException | None) -> int:
    """The characters of the messages of *error* and of every exception behind it (what a
    logged traceback shows), and of the document a JSON error keeps."""
    held = 0
    while error is not None:
        held += len(str(error)) + len(getattr(error, "doc", ""))
        error = error.__cause__ or error.__context__
    return held


async def test_a_json_rpc_error_of_a_megabyte_is_cut_saying_how_long_it_was() -> None:
    stub = StubAgent(rpc=lambda _b: rpc_error(-32001, "m" * MEGABYTE), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(TaskNotFoundError) as caught:
            await client.get_task("t-1")
    error = caught.value
    assert error.code == -32001
    assert error.message == "m" * MAX_MESSAGE_CHARS + CUT
    assert str(error) == error.message
    assert len(repr(error)) < MAX_MESSAGE_CHARS + 100
    assert _held(error) < MAX_MESSAGE_CHARS + 100


@pytest.mark.parametrize(
    ("size", "kept"), [(MAX_DATA_CHARS - 2, True), (MAX_DATA_CHARS - 1, False), (MEGABYTE, False)]
)
async def test_error_data_past_the_bound_is_dropped_saying_so(size: int, kept: bool) -> None:
    data = "d" * size  # its JSON: two characters more, the quotes
    stub = StubAgent(rpc=lambda _b: rpc_error(-32602, "bad input", data), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidParamsError) as caught:
            await client.send_message("hi")
    error = caught.value
    assert error.code == -32602
    assert (error.data, error.message) == (
        (data, "bad input") if kept else (None, "bad input" + DROPPED)
    )


async def test_a_long_message_and_large_data_are_both_bounded() -> None:
    data = [{"loc": ["text"], "msg": "x" * 100}] * 1000
    stub = StubAgent(rpc=lambda _b: rpc_error(-32602, "m" * MEGABYTE, data), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="0.3") as client:
        with pytest.raises(InvalidParamsError) as caught:
            await client.send_message("hi")
    assert caught.value.data is None
    assert caught.value.message == "m" * MAX_MESSAGE_CHARS + CUT + DROPPED


async def test_a_rest_error_status_with_long_message_and_details_is_bounded() -> None:
    # Under the 64 KiB the client reads of an error body: its message and details are what
    # the error would hold.
    extra = {"@type": "type.googleapis.com/google.rpc.DebugInfo", "detail": "d" * 20_000}
    status = NOT_FOUND | {"message": "m" * 40_000, "details": [*NOT_FOUND["details"], extra]}
    agent = AnsweringAgent(answer=json_reply({"error": status}, status=404))
    async with running_server(agent) as url:
        agent.card = card_for(url, "HTTP+JSON", "1.0")
        async with A2AClient(url) as client:
            with pytest.raises(TaskNotFoundError) as caught:
                await client.get_task("t-1")
    assert caught.value.code == -32001
    assert caught.value.data is None
    assert caught.value.message == "m" * MAX_MESSAGE_CHARS + "... (cut: 40000 characters)" + DROPPED


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "result": ' + b"x" * MEGABYTE,
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"task": {"id": "t-1", "status": {"state": "X" * MEGABYTE}}},
            }
        ).encode(),
    ],
    ids=["invalid-json", "invalid-enum"],
)
async def test_an_invalid_answer_of_a_megabyte_leaves_no_megabyte_behind(body: bytes) -> None:
    reply = (200, {"content-type": "application/json"}, [body])
    stub = StubAgent(rpc=lambda _b: reply, card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError) as caught:
            await client.get_task("t-1")
    assert _held(caught.value) < MAX_MESSAGE_CHARS


async def test_a_card_that_is_not_json_leaves_no_megabyte_behind() -> None:
    stub = StubAgent(card=b'{"name": "' + b"x" * MEGABYTE)
    async with running_server(stub) as url, A2AClient(url) as client:
        with pytest.raises(A2ADiscoveryError, match="is not valid JSON") as caught:
            await client.discover()
    assert _held(caught.value) < MAX_MESSAGE_CHARS


def _event(payload: Any, kind: str = "") -> str:
    return (f"event: {kind}\n" if kind else "") + f"data: {json.dumps(payload)}\n\n"


async def _collect(events: Any, into: list[Any]) -> None:
    async for event in events:
        into.append(event)


async def test_an_error_event_mid_stream_is_bounded_after_the_events_before_it() -> None:
    working = {"taskId": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}
    update = {"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate": working}}
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32090, "message": "b" * MEGABYTE}}
    stub = StubAgent(
        rpc=lambda _b: sse_reply(_event(update), _event(error, "error")), card_paths=()
    )
    received: list[Any] = []
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(TaskBusyError) as caught:
            await _collect(client.stream_message("hi"), received)
    assert [e["status"]["state"] for e in received] == ["working"]
    assert caught.value.code == -32090
    assert caught.value.message == "b" * MAX_MESSAGE_CHARS + CUT
    assert _held(caught.value) < MAX_MESSAGE_CHARS + 100


async def test_our_agent_s_task_content_and_its_errors_stay_whole() -> None:
    # A task is data the caller asked for: never cut, however long. An honest error's
    # message and data are under the bounds: kept as sent.
    text = "t" * (MAX_MESSAGE_CHARS * 4)
    async with running_server(build_our_app()) as url, A2AClient(url) as client:
        task = await client.send_message({"text": text}, skill_id="demo.echo")
        with pytest.raises(InvalidParamsError) as caught:
            await client.send_message({"a": "x"}, skill_id="demo.add")
    assert task["status"]["state"] == "completed"
    assert json.dumps("echo: " + text) in json.dumps(task)
    assert caught.value.data and "(cut:" not in caught.value.message
    assert "not kept" not in caught.value.message


#: codes no JSON-RPC error has: past a 32-bit integer, or no integer at all (as JSON text)
NO_CODES = [
    str(10**400),
    str(-(10**400)),
    str(2**31),
    str(-(2**31) - 1),
    "-32001.0",
    "1e400",  # Python reads it as infinity
    '"-32001"',
    "true",
    "null",
    '{"n": -32001}',
]


def _raw_error(code: str, status: int = 200) -> Any:
    body = f'{{"jsonrpc": "2.0", "id": 1, "error": {{"code": {code}, "message": "said  so"}}}}'
    return status, {"content-type": "application/json"}, [body.encode()]


@pytest.mark.parametrize("code", NO_CODES)
async def test_an_error_code_that_is_no_json_rpc_code_is_read_as_an_internal_error(
    code: str,
) -> None:
    stub = StubAgent(rpc=lambda _b: _raw_error(code), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(A2AServerError) as answered:
            await client.get_task("t-1")
        frame = f"event: error\ndata: {_raw_error(code)[2][0].decode()}\n\n"
        stub.rpc = lambda _b: sse_reply(frame)
        with pytest.raises(A2AServerError) as streamed:
            await anext(client.resubscribe("t-1"))
    for error in (answered.value, streamed.value):
        assert type(error) is A2AServerError
        assert (error.code, error.message) == (-32603, "said  so")
        assert repr(error) == "A2AServerError(code=-32603, message='said  so')"


@pytest.mark.parametrize("code", [-(2**31), 2**31 - 1])
async def test_a_32_bit_error_code_is_kept(code: int) -> None:
    stub = StubAgent(rpc=lambda _b: _raw_error(str(code)), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(A2AServerError) as answered:
            await client.get_task("t-1")
    assert answered.value.code == code


async def test_an_error_code_of_more_digits_than_python_reads_is_an_invalid_response() -> None:
    stub = StubAgent(rpc=lambda _b: _raw_error("9" * 5000), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match="invalid JSON") as caught:
            await client.get_task("t-1")
    assert len(caught.value.message) < 1000


async def test_a_refusal_whose_code_is_no_json_rpc_code_is_read_as_an_internal_error_too() -> None:
    stub = StubAgent(rpc=lambda _b: _raw_error(str(-(10**400)), status=500), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(A2AServerError) as caught:
            await client.get_task("t-1")
    assert (caught.value.code, caught.value.message) == (-32603, "said  so")
