"""An answer's media type is parsed, not searched for, and a large error answer is sized.

Each agent here is a real server on 127.0.0.1. A ``2xx`` answer is read as A2A only when
its ``Content-Type`` is JSON (``application/json``, or a ``+json`` type such as
``application/a2a+json``) or, for a stream, ``text/event-stream``: type and subtype
compared case-insensitively, parameters aside. Before, the client searched the header for
``text/event-stream`` (``text/event-streamx`` passed) and read any answer as JSON
(``text/html; note=application/json``, ``application/json-seq``, ``text/plain`` passed).

An error answer is read up to 64 KiB; one larger (a 1 MB JSON error from a Starlette app)
is reported by its size and HTTP status, not as an unread body.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from apcore_a2a.client import A2AClient, A2AConnectionError, InvalidAgentResponseError
from tests._support import cli, running_server
from tests.client._stub_agent import TASK, TASK_03, AnsweringAgent, card_for

BINDINGS = [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0"), ("HTTP+JSON", "0.3")]


def _task_answer(binding: str, version: str) -> bytes:
    """The finished task (REST 0.3 speaks protobuf's JSON names, as 1.0 does)."""
    task = TASK_03 if (binding, version) == ("JSONRPC", "0.3") else TASK
    if binding == "JSONRPC":
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": task}).encode()
    return json.dumps(task).encode()


def _event_answer(binding: str, version: str) -> bytes:
    """An SSE stream of one event: the finished task."""
    task = TASK_03 if (binding, version) == ("JSONRPC", "0.3") else {"task": TASK}
    result = {"jsonrpc": "2.0", "id": 1, "result": task} if binding == "JSONRPC" else task
    return f"data: {json.dumps(result)}\n\n".encode()


async def _get_task(url: str, binding: str, version: str) -> dict[str, Any]:
    async with A2AClient(url, protocol=version) as client:
        return await client.get_task("t-1")


async def _stream(url: str, binding: str, version: str) -> list[dict[str, Any]]:
    async with A2AClient(url, protocol=version) as client:
        return [event async for event in client.stream_message("hi")]


def _agent(content_type: str | None, body: bytes) -> AnsweringAgent:
    headers = {} if content_type is None else {"content-type": content_type}
    return AnsweringAgent(answer=(200, headers, [body]))


NOT_JSON = [
    "application/jsonx",
    "application/json-seq",
    "text/html; note=application/json",
    "text/plain",
    "text/json+html",
    "application/+json",
    "application json",
    "text/html;  note=a  b",  # its spaces kept as sent: a header is quoted as given
    None,
]


@pytest.mark.parametrize("content_type", NOT_JSON)
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_an_answer_that_is_not_json_by_its_media_type_is_invalid(
    binding: str, version: str, content_type: str | None
) -> None:
    stub = _agent(content_type, _task_answer(binding, version))
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, version)
        with pytest.raises(InvalidAgentResponseError, match="not JSON") as raised:
            await _get_task(url, binding, version)
    assert str(content_type or "no content type") in str(raised.value)


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "APPLICATION/JSON; charset=UTF-8",
        "application/a2a+json",
        "Application/Problem+JSON",
    ],
)
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_an_answer_of_a_json_media_type_is_read(
    binding: str, version: str, content_type: str
) -> None:
    stub = _agent(content_type, _task_answer(binding, version))
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, version)
        task = await _get_task(url, binding, version)
    assert (task["id"], task["status"]["state"]) == ("t-1", "completed")


@pytest.mark.parametrize(
    "content_type",
    [
        "text/event-streamx",
        "text/event-stream-x",
        "text/html; note=text/event-stream",
        "text/plain",
    ],
)
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_stream_that_is_not_sse_by_its_media_type_is_invalid(
    binding: str, version: str, content_type: str
) -> None:
    stub = _agent(content_type, _event_answer(binding, version))
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, version)
        with pytest.raises(InvalidAgentResponseError, match="not text/event-stream") as raised:
            await _stream(url, binding, version)
    assert type(raised.value) is InvalidAgentResponseError
    assert content_type in str(raised.value)


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_stream_named_in_capitals_is_read(binding: str, version: str) -> None:
    """Media types are case-insensitive: ``Text/Event-Stream`` is an SSE stream (a2a-sdk
    and httpx-sse look for the lowercase spelling; the client hands them that)."""
    stub = _agent("Text/Event-Stream; charset=utf-8", _event_answer(binding, version))
    async with running_server(stub) as url:
        stub.card = card_for(url, binding, version)
        [event] = await _stream(url, binding, version)
    assert (event["kind"], event["status"]["state"]) == ("task", "completed")


# -- an error answer over the 64 KiB the client reads ---------------------------------

#: a JSON-RPC error whose message is 1 MB, as an agent might answer with a whole log
BIG_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x" * 1_000_000}}
BIG_SIZE = len(json.dumps(BIG_ERROR, separators=(",", ":")).encode())
#: what an endless error body sends before it gives up (the client stops long before)
ENDLESS_LIMIT = 256 * 1024 * 1024


async def _endless() -> AsyncIterator[bytes]:
    yield b'{"error": {"message": "'
    for _ in range(ENDLESS_LIMIT // 65536):
        yield b"x" * 65536


def _big_error_app(status: int, *, endless: bool = False) -> Starlette:
    """Every A2A route answers *status* with a 1 MB JSON error (Content-Length given), or
    an endless one (chunked: no size)."""

    async def card(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return JSONResponse(card_for(base, request.app.state.binding, "1.0"))

    async def answer(_request: Request) -> Response:
        if endless:
            return StreamingResponse(_endless(), status, media_type="application/json")
        return Response(
            json.dumps(BIG_ERROR, separators=(",", ":")), status, media_type="application/json"
        )

    routes = [Route("/.well-known/agent-card.json", card)]
    routes.append(Route("/{path:path}", answer, methods=["GET", "POST"]))
    return Starlette(routes=routes)


CALLS = {"get_task": _get_task, "stream_message": _stream}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_1_mb_json_error_answer_is_reported_by_its_size_and_status(
    binding: str, call: str
) -> None:
    app = _big_error_app(500)
    app.state.binding = binding
    async with running_server(app) as url:
        with pytest.raises(A2AConnectionError) as raised:
            await CALLS[call](url, binding, "1.0")
    said = str(raised.value)
    assert raised.value.status_code == 500
    assert said.startswith(f"HTTP 500 from {url}"), said
    assert said.endswith(
        f": an error answer of {BIG_SIZE} bytes (over the 64 KiB the client reads)"
    ), said


async def test_an_endless_error_answer_is_read_no_further_than_64_kib() -> None:
    """Chunked, with no size: the client stops reading at its cap and says so (the server
    would send 256 MB)."""
    app = _big_error_app(502, endless=True)
    app.state.binding = "JSONRPC"
    async with running_server(app) as url:
        with pytest.raises(A2AConnectionError) as raised:
            await _get_task(url, "JSONRPC", "1.0")
    assert raised.value.status_code == 502
    assert str(raised.value).endswith(": an error answer (over the 64 KiB the client reads)")


async def test_a_stream_request_answered_200_with_1_mb_of_json_is_sized() -> None:
    app = _big_error_app(200)
    app.state.binding = "JSONRPC"
    async with running_server(app) as url:
        with pytest.raises(InvalidAgentResponseError) as raised:
            await _stream(url, "JSONRPC", "1.0")
    assert str(raised.value) == (
        f"the agent answered a stream request with HTTP 200 and application/json of "
        f"{BIG_SIZE} bytes (over the 64 KiB the client reads), not text/event-stream"
    )


async def test_the_cli_says_the_size_of_a_1_mb_error_in_one_line() -> None:
    app = _big_error_app(500)
    app.state.binding = "JSONRPC"
    async with running_server(app) as url:
        code, out, err = await cli("task", "get", url, "t-1")
    assert (code, out) == (3, "")
    assert err == (
        f"error: A2AConnectionError: HTTP 500 from {url}: an error answer of {BIG_SIZE} "
        "bytes (over the 64 KiB the client reads)\n"
    )


@pytest.mark.parametrize("content_type", ["text/html; note=application/json", "application/jsonx"])
async def test_the_cli_says_an_answer_is_not_json_in_one_line(content_type: str) -> None:
    stub = _agent(content_type, _task_answer("JSONRPC", "1.0"))
    async with running_server(stub) as url:
        stub.card = card_for(url, "JSONRPC", "1.0")
        code, out, err = await cli("task", "get", url, "t-1")
    assert (code, out) == (1, "")
    assert err == (
        f"error: InvalidAgentResponseError (-32006): the agent answered {url} with "
        f"{content_type}, not JSON (application/json)\n"
    )
