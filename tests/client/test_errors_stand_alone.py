"""A client error stands alone: nothing behind it keeps what the agent answered.

The agents here are real servers on 127.0.0.1 answering what no honest agent would: a
10 MiB task the SDK cannot read (JSON-RPC and REST, A2A 1.0 and 0.3, a call and a stream),
and gRPC statuses of a long message (1.0 and 0.3, a call and a stream). The client raises
its typed error, which chains no exception (``__cause__``, ``__context__``), and whose
traceback's frames keep none of the objects they held (the SDK's error, the answer's
text): what it keeps alive is its own bounded message (docs/client.md, *Errors*). Before,
a logged traceback of one printed 31 MiB, and the error kept 40 MiB alive.
"""

from __future__ import annotations

import contextlib
import gc
import json
import traceback
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.server.routes import create_agent_card_routes
from a2a.types import a2a_pb2_grpc
from google.protobuf.message import Message
from starlette.applications import Starlette

from apcore_a2a.cli.client import MAX_ERROR_LINE
from apcore_a2a.client import A2AClient, A2AClientError, A2AServerError, InvalidAgentResponseError
from apcore_a2a.client.client import PUSH_STATUS_EXTENSION
from apcore_a2a.client.errors import MAX_MESSAGE_CHARS
from tests._support import cli, free_port, running_server
from tests.client._sdk_agent import agent_card
from tests.client._stub_agent import (
    AnsweringAgent,
    Reply,
    card_for,
    json_reply,
    rpc_error,
    sse_reply,
)

BIG = 10 * 1024 * 1024
#: a gRPC status message gRPC lets through every time (it refuses from 8 KiB, at random)
LONG = 6000


@dataclass
class Raised:
    """What one failed call raised, taken down while nothing else holds the error."""

    cls: type[BaseException]
    message: str
    chained: tuple[str, str]  # the types of its __cause__ and __context__
    printed: int  # characters of the traceback a logger prints
    behind: list[str]  # objects the frames of its traceback still hold: exceptions, long texts
    kept: int  # bytes allocated only while the error is kept


def _behind(error: BaseException) -> list[str]:
    found = []
    tb = error.__traceback__
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            if isinstance(value, BaseException) and value is not error:
                found.append(f"{tb.tb_frame.f_code.co_name}: {name}={type(value).__name__}")
            elif isinstance(value, str | bytes) and len(value) > MAX_MESSAGE_CHARS:
                found.append(f"{tb.tb_frame.f_code.co_name}: {name}={len(value)}")
            elif isinstance(value, Message) and value.ByteSize() > MAX_MESSAGE_CHARS:
                # protobuf's memory is its C library's: tracemalloc does not see it
                found.append(f"{tb.tb_frame.f_code.co_name}: {name}={value.ByteSize()}")
        tb = tb.tb_next
    return found


async def _raised(call: Callable[[], Awaitable[Any]]) -> Raised:
    gc.collect()
    tracemalloc.start()
    try:
        try:
            await call()
        except A2AClientError as exc:
            error: A2AClientError | None = exc
        else:
            pytest.fail("the call raised nothing")
        assert error is not None
        gc.collect()
        with_error = tracemalloc.get_traced_memory()[0]
        raised = Raised(
            type(error),
            error.message,
            (type(error.__cause__).__name__, type(error.__context__).__name__),
            len("".join(traceback.format_exception(error))),
            _behind(error),
            0,
        )
        error = None
        gc.collect()
        raised.kept = with_error - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return raised


def _unreadable(version: str) -> dict[str, Any]:
    """A task the SDK refuses, 10 MiB of the agent's text in what it refuses."""
    if version == "1.0":
        task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
        return task | {"history": [{"role": "ROLE_USER", "parts": "p" * BIG}]}
    task = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}}
    return task | {"id": {"said": "i" * BIG}}


async def _consume(events: AsyncIterator[Any]) -> None:
    async for _event in events:
        pass


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_an_unreadable_10_mib_answer_leaves_nothing_behind_the_error(
    binding: str, version: str, stream: bool
) -> None:
    result: Any = _unreadable(version)
    if stream and version == "1.0":
        result = {"task": result}
    payload = {"jsonrpc": "2.0", "id": 1, "result": result} if binding == "JSONRPC" else result
    answer = sse_reply(f"data: {json.dumps(payload)}\n\n") if stream else json_reply(payload)
    agent = AnsweringAgent(answer=answer)
    async with running_server(agent) as url:
        agent.card = card_for(url, binding, version)
        async with A2AClient(url, timeout=60) as client:
            await client.discover()
            call = _consume(client.stream_message("hi")) if stream else client.get_task("t-1")
            raised = await _raised(lambda: call)
    assert raised.cls is InvalidAgentResponseError
    assert "invalid" in raised.message and len(raised.message) < 400  # its words, cut
    assert raised.chained == ("NoneType", "NoneType")
    assert raised.behind == []
    assert raised.printed < 4 * MAX_MESSAGE_CHARS
    assert raised.kept < 256 * 1024, f"{raised.kept} bytes kept alive by the error"


#: answers the SDK reads, but the client refuses after the call: (method, answer)
READ_THEN_REFUSED = {
    # a task without an id, 10 MiB of history
    "task-without-id": (
        "get_task",
        {"id": "", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
        | {"history": [{"role": "ROLE_USER", "parts": [{"text": "t" * BIG}]}]},
    ),
    # no push status document (apcore-a2a's own route), 10 MiB of it
    "no-push-status": ("push_status", {"configs": None, "said": "s" * BIG}),
}


@pytest.mark.parametrize("case", list(READ_THEN_REFUSED))
async def test_an_answer_refused_after_the_call_is_not_kept_by_the_error(case: str) -> None:
    method, result = READ_THEN_REFUSED[case]
    body = {"jsonrpc": "2.0", "id": 1, "result": result} if method == "get_task" else result
    agent = AnsweringAgent(answer=json_reply(body))
    async with running_server(agent) as url:
        agent.card = card_for(url, "JSONRPC", "1.0")
        agent.card["capabilities"]["extensions"] = [{"uri": PUSH_STATUS_EXTENSION}]
        async with A2AClient(url, timeout=60) as client:
            await client.discover()
            raised = await _raised(lambda: getattr(client, method)("t-1"))
    assert raised.cls is InvalidAgentResponseError
    assert raised.chained == ("NoneType", "NoneType")
    assert raised.behind == []
    assert raised.kept < 256 * 1024, f"{raised.kept} bytes kept alive by the error"


class _Refusing(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """Refuses every message, streamed or not, with a long status message."""

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.INTERNAL, "m" * LONG)

    async def SendStreamingMessage(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.INTERNAL, "m" * LONG)
        yield  # an async generator, as grpc.aio streams it


class _Refusing03(a2a_v0_3_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    SendMessage = _Refusing.SendMessage
    SendStreamingMessage = _Refusing.SendStreamingMessage


@contextlib.asynccontextmanager
async def _grpc_agent(version: str) -> AsyncIterator[str]:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Refusing(), server)  # type: ignore[no-untyped-call]
    a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(_Refusing03(), server)  # type: ignore[no-untyped-call]
    address = f"127.0.0.1:{free_port()}"
    assert server.add_insecure_port(address)
    await server.start()
    card = agent_card(address, versions=(version,), binding="GRPC")
    try:
        async with running_server(Starlette(routes=create_agent_card_routes(card))) as url:
            yield url
    finally:
        await server.stop(0)


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_grpc_status_leaves_neither_the_sdk_s_error_nor_grpc_s_behind(
    version: str, stream: bool
) -> None:
    async with _grpc_agent(version) as url, A2AClient(url, timeout=30) as client:
        await client.discover()
        call = _consume(client.stream_message("hi")) if stream else client.send_message("hi")
        raised = await _raised(lambda: call)
    assert raised.cls is A2AServerError
    assert raised.message.startswith("gRPC INTERNAL from ")
    assert raised.chained == ("NoneType", "NoneType")
    assert raised.behind == []
    assert raised.printed < 4 * MAX_MESSAGE_CHARS


#: a hostile answer for each typed error the CLI shows: (a JSON-RPC answer's body, sent as
#: JSON or as one SSE event; an HTTP refusal; or a card that is none), what the one error
#: line starts with, the exit code
CLI_CASES: dict[str, tuple[bytes | Reply, str, int]] = {
    "unreadable-task": (
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": _unreadable("1.0")}).encode(),
        "InvalidAgentResponseError (-32006): agent returned an invalid",
        1,
    ),
    "not-json": (
        b"{" + b"x" * BIG,
        "InvalidAgentResponseError (-32006): agent returned invalid",
        1,
    ),
    "remote-error": (
        rpc_error(-32603, "m" * BIG, ["d" * BIG])[2][0],
        "A2AServerError (-32603): mmm",
        1,
    ),
    "http-502": (
        (502, {"content-type": "text/plain"}, [b"bad gateway " + b"b" * BIG]),
        "A2AConnectionError: HTTP 502 from",
        3,
    ),
    "http-401": (
        (401, {"content-type": "text/plain"}, [b"who are you"]),
        "A2AAuthenticationError: HTTP 401 from",
        5,
    ),
    "card-not-json": ((200, {}, []), "A2ADiscoveryError: agent card at", 3),
}


@pytest.mark.parametrize("command", ["call", "task-get"])
@pytest.mark.parametrize("case", list(CLI_CASES))
async def test_the_cli_shows_each_typed_error_in_one_bounded_line(case: str, command: str) -> None:
    said, shown, exit_code = CLI_CASES[case]
    streams = command == "call"  # it follows the task's stream
    if case == "unreadable-task" and streams:  # a stream event holds the task in a member
        said = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"task": _unreadable("1.0")}})
        said = said.encode()
    if isinstance(said, bytes):
        kind = "text/event-stream" if streams else "application/json"
        said = (200, {"content-type": kind}, [b"data: " + said + b"\n\n" if streams else said])
    agent = AnsweringAgent(answer=said)
    async with running_server(agent) as url:
        agent.card = card_for(url, "JSONRPC", "1.0")
        if case == "card-not-json":
            agent.card = b"{" + b"c" * (1024 * 1024)
        args = ("call", url, "--text", "hi") if streams else ("task", "get", url, "t-1")
        code, out, err = await cli(*args)
    assert (code, out) == (exit_code, ""), err[:500]
    assert err.startswith(f"error: {shown}"), err[:500]
    assert err.count("\n") == 1 and "Traceback" not in err
    assert len(err) < MAX_ERROR_LINE + 20
