"""A hostile or broken gRPC agent cannot take the client's memory or time, nor crash it.

Each agent here is a real ``grpc.aio`` server on 127.0.0.1 implementing a2a-sdk's generated
A2A service, its card (served over HTTP by a2a-sdk's card routes) naming the gRPC address.
It answers what no honest agent would: error statuses whose ``google.rpc.Status`` details
are corrupt or name types nobody knows, answers larger than the client reads, streams that
outlive the client's ``timeout`` or never end, a card naming an address gRPC reads as a
local Unix socket. The client raises its typed errors (docs/client.md, *Errors*).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.server.routes import create_agent_card_routes
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from starlette.applications import Starlette

from apcore_a2a.client import (
    A2AClient,
    A2AConnectionError,
    A2AServerError,
    CrossOriginEndpointError,
    InvalidAgentResponseError,
    TaskNotFoundError,
)
from apcore_a2a.client._bounded import MAX_ANSWER_BYTES
from apcore_a2a.client.errors import MAX_MESSAGE_CHARS
from tests._support import cli, free_port, running_server
from tests.client._sdk_agent import agent_card

Answer = Callable[[grpc.aio.ServicerContext], Awaitable[pb.Task]]
Events = Callable[[], AsyncIterator[pb.StreamResponse]]
DETAILS_KEY = "grpc-status-details-bin"


def _task(state: int = pb.TASK_STATE_COMPLETED) -> pb.Task:
    return pb.Task(id="t-1", context_id="c-1", status=pb.TaskStatus(state=state))


def _working() -> pb.StreamResponse:
    working = pb.TaskStatus(state=pb.TASK_STATE_WORKING)
    update = pb.TaskStatusUpdateEvent(task_id="t-1", context_id="c-1", status=working)
    return pb.StreamResponse(status_update=update)


class _Hostile(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """Answers ``SendMessage`` and ``GetTask`` with :attr:`answer` and streams :attr:`events`; records the
    metadata of each call."""

    def __init__(self) -> None:
        self.answer: Answer = self._completed
        self.events: Events = self._no_events
        self.metadata: list[dict[str, Any]] = []

    @staticmethod
    async def _completed(_context: grpc.aio.ServicerContext) -> pb.Task:
        return _task()

    @staticmethod
    async def _no_events() -> AsyncIterator[pb.StreamResponse]:
        yield pb.StreamResponse(task=_task())

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.metadata.append(dict(context.invocation_metadata() or ()))
        return pb.SendMessageResponse(task=await self.answer(context))

    async def GetTask(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.answer(context)

    async def SendStreamingMessage(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamResponse]:
        async for event in self.events():
            yield event


class _Hostile03(a2a_v0_3_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """The A2A 0.3 service: ``SendMessage`` fails as :attr:`_Hostile.answer` does."""

    def __init__(self, hostile: _Hostile) -> None:
        self.hostile = hostile

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await self.hostile.answer(context)
        raise AssertionError("only failing answers are sent in A2A 0.3")

    async def SendStreamingMessage(
        self, request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        await self.hostile.answer(context)
        raise AssertionError("only failing or silent streams are sent in A2A 0.3")
        yield  # an async generator, as grpc.aio streams it


@contextlib.asynccontextmanager
async def _grpc_agent(
    address: str | None = None, version: str = "1.0"
) -> AsyncIterator[tuple[str, _Hostile]]:
    """The hostile agent on gRPC (at *address*, a gRPC server address, else a free port on
    127.0.0.1) and its card over HTTP naming it for *version*; yields the card's base URL."""
    hostile = _Hostile()
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(hostile, server)  # type: ignore[no-untyped-call]
    a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(_Hostile03(hostile), server)  # type: ignore[no-untyped-call]
    address = address or f"127.0.0.1:{free_port()}"
    assert server.add_insecure_port(address)
    await server.start()
    card = agent_card(address, versions=(version,), binding="GRPC")
    try:
        async with running_server(Starlette(routes=create_agent_card_routes(card))) as url:
            yield url, hostile
    finally:
        await server.stop(0)


def _status(code: grpc.StatusCode, message: str, *details: any_pb2.Any) -> status_pb2.Status:
    return status_pb2.Status(code=code.value[0], message=message, details=list(details))


def _failing(status: status_pb2.Status, details: bytes | None = None) -> Answer:
    """An answer that aborts with *status*, its details sent as *details* (else the
    status's own bytes)."""

    async def answer(context: grpc.aio.ServicerContext) -> pb.Task:
        code = next(c for c in grpc.StatusCode if c.value[0] == status.code)
        sent = status.SerializeToString() if details is None else details
        await context.abort(code, status.message, trailing_metadata=((DETAILS_KEY, sent),))
        raise AssertionError("abort returns no answer")

    return answer


def _packed(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


TASK_NOT_FOUND = _packed(
    error_details_pb2.ErrorInfo(reason="TASK_NOT_FOUND", domain="a2a-protocol.org")
)
#: details no client can read: a corrupt ErrorInfo, and a type nobody registered
CORRUPT_ERROR_INFO = any_pb2.Any(
    type_url="type.googleapis.com/google.rpc.ErrorInfo", value=b"\xff\xff"
)
UNKNOWN_TYPE = any_pb2.Any(type_url="type.googleapis.com/evil.Unknown", value=b"\x08\x01")


@pytest.mark.parametrize(
    ("answer", "expected", "said"),
    [
        # Details that are not a google.rpc.Status at all: the status code and message say it.
        (
            _failing(_status(grpc.StatusCode.INTERNAL, "boom"), b"\xff\xff\xff"),
            A2AServerError,
            "boom",
        ),
        (
            _failing(_status(grpc.StatusCode.NOT_FOUND, "gone", UNKNOWN_TYPE)),
            A2AServerError,
            "gone",
        ),
        # A detail that cannot be read does not hide the one that can.
        (
            _failing(
                _status(grpc.StatusCode.NOT_FOUND, "no task", CORRUPT_ERROR_INFO, TASK_NOT_FOUND)
            ),
            TaskNotFoundError,
            "no task",
        ),
        # Details that contradict the call's status: the call's status is what counts.
        (
            _failing(
                _status(grpc.StatusCode.NOT_FOUND, "gone"),
                _status(grpc.StatusCode.NOT_FOUND, "other", TASK_NOT_FOUND).SerializeToString(),
            ),
            A2AServerError,
            "gRPC NOT_FOUND from 127.0.0.1:",
        ),
    ],
    ids=["not-a-status", "unknown-type", "corrupt-error-info", "contradicting"],
)
@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_error_details_no_one_can_read_are_a_typed_error(
    answer: Answer, expected: type[Exception], said: str, version: str
) -> None:
    async with _grpc_agent(version=version) as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer = answer
        with pytest.raises(expected) as raised:
            await client.send_message("hi")
    assert said in str(raised.value)


async def _long_not_found(context: grpc.aio.ServicerContext) -> pb.Task:
    # As a 0.3 agent names its error, without details: 6000 characters stay under gRPC's
    # 8 KiB soft limit of trailers, which it enforces at random up to its 16 KiB hard limit.
    await context.abort(grpc.StatusCode.NOT_FOUND, "TaskNotFoundError: " + "m" * 6000)
    raise AssertionError("abort returns no answer")


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_long_status_message_is_cut_and_one_past_grpcs_limit_is_refused(
    version: str,
) -> None:
    async with _grpc_agent(version=version) as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer = _long_not_found
        with pytest.raises(TaskNotFoundError) as long:
            await client.send_message("hi")
        hostile.answer = _failing(_status(grpc.StatusCode.NOT_FOUND, "m" * 2**20, TASK_NOT_FOUND))
        with pytest.raises(A2AServerError, match="RESOURCE_EXHAUSTED") as huge:
            await client.send_message("hi")
    assert long.value.message == "m" * MAX_MESSAGE_CHARS + "... (cut: 6000 characters)"
    assert len(huge.value.message) < 1000


async def test_the_cli_says_what_a_corrupt_grpc_error_is_in_one_line() -> None:
    async with _grpc_agent() as (url, hostile):
        status = _status(grpc.StatusCode.INTERNAL, "boom\x1b[2J\nforged line\u202e", UNKNOWN_TYPE)
        hostile.answer = _failing(status, b"\xff\xff\xff")
        code, out, err = await cli("task", "get", url, "t-1")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "\x1b" not in err and "\u202e" not in err
    assert "boom\\x1b[2J" in err and "forged line\\u202e" in err
    assert err.startswith("error: A2AServerError (-32603): gRPC INTERNAL from 127.0.0.1:"), err


@pytest.mark.parametrize("allow_other_origins", [False, True])
async def test_a_card_cannot_send_the_client_to_a_local_socket(allow_other_origins: bool) -> None:
    # gRPC reads "unix-abstract:NAME@127.0.0.1" as a Unix socket on the caller's machine,
    # while the address's host, read as a URL, is the agent's own: 127.0.0.1.
    address = f"unix-abstract:apcore-a2a-{free_port()}@127.0.0.1"
    async with (
        _grpc_agent(address) as (url, hostile),
        A2AClient(url, auth="secret", allow_other_origins=allow_other_origins) as client,
    ):
        with pytest.raises(CrossOriginEndpointError, match="no host:port"):
            await client.send_message("hi")
    assert hostile.metadata == []


async def test_an_address_named_like_a_grpc_scheme_is_a_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "unix:PORT" is host "unix", port PORT, as the origin rule reads it; gRPC would dial
    # the Unix socket PORT in the working directory, with the caller's credentials.
    port = free_port()
    monkeypatch.chdir(tmp_path)
    async with _grpc_agent(f"unix:{tmp_path}/{port}") as (_url, hostile):
        card = agent_card(f"unix:{port}", versions=("1.0",), binding="GRPC")
        app = Starlette(routes=create_agent_card_routes(card))
        async with (
            running_server(app) as other,
            A2AClient(other, auth="secret", allow_other_origins=True, timeout=5) as client,
        ):
            with pytest.raises(A2AConnectionError):
                await client.send_message("hi")
    assert hostile.metadata == []


def _padded(size: int) -> pb.Task:
    """A completed task of about *size* bytes on the wire."""
    task = _task()
    task.metadata.fields["pad"].string_value = "x" * size
    return task


async def test_grpc_answers_are_read_up_to_the_limit_http_answers_are() -> None:
    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=60) as client:

        async def answer(_context: grpc.aio.ServicerContext) -> pb.Task:
            return _padded(8 * 1024 * 1024)  # gRPC's own default stops at 4 MiB

        async def events() -> AsyncIterator[pb.StreamResponse]:
            yield pb.StreamResponse(task=_padded(8 * 1024 * 1024))

        hostile.answer, hostile.events = answer, events
        task = await client.send_message("hi")
        assert len(task["metadata"]["pad"]) == 8 * 1024 * 1024
        [event] = [e async for e in client.stream_message("hi")]
        assert len(event["metadata"]["pad"]) == 8 * 1024 * 1024


async def test_a_grpc_answer_larger_than_the_limit_is_an_invalid_response() -> None:
    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=60) as client:

        async def answer(_context: grpc.aio.ServicerContext) -> pb.Task:
            return _padded(MAX_ANSWER_BYTES)

        hostile.answer = answer
        with pytest.raises(InvalidAgentResponseError, match=f"larger than {MAX_ANSWER_BYTES}"):
            await client.send_message("hi")


async def test_the_timeout_bounds_each_wait_of_a_grpc_stream_not_the_stream() -> None:
    async def events() -> AsyncIterator[pb.StreamResponse]:
        yield pb.StreamResponse(task=_task(pb.TASK_STATE_WORKING))
        for _ in range(8):  # 2 s of events, each within the 1 s timeout
            await asyncio.sleep(0.25)
            yield _working()
        yield pb.StreamResponse(task=_task())

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=1) as client:
        hostile.events = events
        seen = [e["status"]["state"] async for e in client.stream_message("hi")]
    assert seen == ["working"] * 9 + ["completed"]


async def test_the_timeout_gives_up_on_a_grpc_stream_that_falls_silent() -> None:
    async def events() -> AsyncIterator[pb.StreamResponse]:
        yield pb.StreamResponse(task=_task(pb.TASK_STATE_WORKING))
        await asyncio.Event().wait()  # and never another event, nor the end
        yield _working()

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=1) as client:
        hostile.events = events
        stream = client.stream_message("hi")
        assert (await anext(stream))["status"]["state"] == "working"
        with pytest.raises(A2AConnectionError, match="timed out"):
            await anext(stream)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
async def test_a_number_json_has_not_is_an_invalid_response_over_grpc(number: float) -> None:
    async def answer(_context: grpc.aio.ServicerContext) -> pb.Task:
        task = _task()
        task.metadata.fields["n"].number_value = number  # protobuf's double holds it
        return task

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer = answer
        with pytest.raises(InvalidAgentResponseError, match="JSON cannot hold"):
            await client.send_message("hi")


@pytest.mark.usefixtures("tracing")
async def test_enum_numbers_the_client_does_not_know_read_as_unknown_over_grpc() -> None:
    async def answer(_context: grpc.aio.ServicerContext) -> pb.Task:
        task = _task()
        task.status.state = 77  # type: ignore[assignment]  # a state of a newer A2A
        task.status.message.role = 9  # type: ignore[assignment]
        return task

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer = answer
        task = await client.send_message("hi")
    assert task["status"]["state"] == "unknown"
    assert task["status"]["message"]["role"] == "unknown"


async def _never_answers(_context: grpc.aio.ServicerContext) -> pb.Task:
    """An agent's unary answer that never comes."""
    await asyncio.Event().wait()
    raise AssertionError("never answers")


async def _never_streams() -> AsyncIterator[pb.StreamResponse]:
    """An agent's stream whose first event never comes."""
    await asyncio.Event().wait()
    yield _working()


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_the_timeout_gives_up_on_a_grpc_agent_that_never_answers(version: str) -> None:
    # a2a-sdk's 0.3 gRPC transport sends no deadline (its 1.0 one sends the call's
    # timeout): the client's own bound on the whole call is what ends the 0.3 wait.
    async with (
        _grpc_agent(version=version) as (url, hostile),
        A2AClient(url, timeout=1) as client,
    ):
        hostile.answer = _never_answers
        with pytest.raises(A2AConnectionError, match=r"SendMessage to 127\.0\.0\.1:\d+ timed out"):
            await client.send_message("hi")


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_the_timeout_gives_up_on_a_grpc_stream_that_never_starts(version: str) -> None:
    async with (
        _grpc_agent(version=version) as (url, hostile),
        A2AClient(url, timeout=1) as client,
    ):
        hostile.answer, hostile.events = _never_answers, _never_streams
        with pytest.raises(A2AConnectionError, match="timed out"):
            await anext(client.stream_message("hi"))


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_the_cli_timeout_bounds_a_grpc_agent_that_never_answers(version: str) -> None:
    async with _grpc_agent(version=version) as (url, hostile):
        hostile.answer, hostile.events = _never_answers, _never_streams
        code, out, err = await cli("call", url, "--text", "hi", "--timeout", "1")
    # the CLI's own code for a call still running when --timeout ends (EXIT_CODES)
    assert (code, out) == (6, ""), err
    assert (
        err
        == "error: no answer from the agent after --timeout 1 s; a longer --timeout waits longer\n"
    )


async def test_error_metadata_past_grpcs_limit_is_a_typed_error() -> None:
    # gRPC refuses trailing metadata over 16 KiB itself: the message is no megabyte line.
    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer = _failing(_status(grpc.StatusCode.INTERNAL, "y" * 1_000_000))
        with pytest.raises(A2AServerError, match="RESOURCE_EXHAUSTED") as raised:
            await client.send_message("hi")
    assert len(str(raised.value)) < 1000


async def test_a_grpc_stream_ending_before_its_first_event_is_an_invalid_response() -> None:
    """A2A 1.0.1 §3.1.6: a stream starts with the task (or a message). Before: a stream of
    nothing ended as a finished one. (An event of no payload the client knows:
    test_stream_members.py.)"""

    async def nothing() -> AsyncIterator[pb.StreamResponse]:
        for _ in ():
            yield _working()

    async with _grpc_agent() as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.events = nothing
        with pytest.raises(InvalidAgentResponseError, match="before its first event"):
            [e async for e in client.stream_message("hi")]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("stream", [False, True], ids=["unary", "stream"])
async def test_a_typed_grpc_error_has_nothing_behind_it(version: str, stream: bool) -> None:
    """The SDK's error (and gRPC's behind it) holds the agent's whole status message: it is
    neither the typed error's cause nor its context, so no traceback, logger or error
    reporter that walks the chain finds it."""
    answer = _failing(_status(grpc.StatusCode.NOT_FOUND, "no task", TASK_NOT_FOUND))

    async def events() -> AsyncIterator[pb.StreamResponse]:
        yield pb.StreamResponse(task=_task(pb.TASK_STATE_WORKING))
        raise RuntimeError("the agent fails mid-stream")

    async def call(client: A2AClient) -> None:
        if stream:
            [e async for e in client.stream_message("hi")]
        else:
            await client.send_message("hi")

    # A 1.0 stream starts, then fails (gRPC UNKNOWN); a 0.3 one fails at once.
    expected = A2AServerError if stream and version == "1.0" else TaskNotFoundError
    async with _grpc_agent(version=version) as (url, hostile), A2AClient(url, timeout=30) as client:
        hostile.answer, hostile.events = answer, events
        with pytest.raises(expected) as raised:
            await call(client)
    error = raised.value
    assert (error.__cause__, error.__context__) == (None, None)
    if isinstance(error, TaskNotFoundError):  # what the agent said stays on the typed error
        assert (error.code, error.message) == (-32001, "no task")
        assert error.data[0]["reason"] == "TASK_NOT_FOUND"
