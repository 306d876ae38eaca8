"""No attribute of a client error, nor a logged traceback of it, holds an agent's text whole.

The agents here are real servers on 127.0.0.1: a card (served by Starlette under uvicorn)
naming a megabyte interface URL on another origin, and a raw ``grpc.aio`` server whose
status messages run to 6000 characters (under gRPC's own 8 KiB soft limit of trailers).
The client raises its typed error with every text it keeps bounded as its message is
(``MAX_MESSAGE_CHARS``, docs/client.md, *Errors*), and what a logger prints of it shows
no more: the SDK's error behind it, which keeps the status message whole, is not printed.
The CLI's waiting line shows a task of a megabyte id cut as its error line is.
"""

from __future__ import annotations

import contextlib
import json
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from a2a.server.routes import create_agent_card_routes
from a2a.types import a2a_pb2_grpc
from starlette.applications import Starlette

from apcore_a2a.cli.client import MAX_ERROR_LINE
from apcore_a2a.client import (
    A2AClient,
    A2AServerError,
    CrossOriginEndpointError,
    TaskNotFoundError,
)
from apcore_a2a.client.errors import MAX_MESSAGE_CHARS
from tests._support import cli, free_port, running_server
from tests.client._sdk_agent import agent_card
from tests.client._stub_agent import StubAgent, card_for

MEGABYTE = 1024 * 1024
#: what gRPC lets through in trailers every time (it refuses from 8 KiB, at random)
LONG = 6000


def _attributes_held(error: BaseException) -> int:
    """The characters of every value *error* keeps (its args and attributes)."""
    values = [*error.args, *vars(error).values()]
    return sum(len(str(value)) for value in values if value is not None)


def _cut(text: str) -> str:
    return f"{text[:MAX_MESSAGE_CHARS]}... (cut: {len(text)} characters)"


@pytest.mark.parametrize(
    ("binding", "named"),
    [
        ("JSONRPC", "http://elsewhere.example/" + "p" * MEGABYTE),
        ("GRPC", "elsewhere.example:50051/" + "p" * MEGABYTE),
    ],
    ids=["http-url", "grpc-address"],
)
async def test_a_megabyte_url_on_another_origin_is_held_cut(binding: str, named: str) -> None:
    agent = StubAgent(card=card_for(named, binding, "1.0"))
    async with running_server(agent) as url, A2AClient(url) as client:
        with pytest.raises(CrossOriginEndpointError) as caught:
            await client.get_task("t-1")
    error = caught.value
    assert error.url == _cut(named)
    assert error.agent_origin == url.rstrip("/")
    assert _attributes_held(error) < 4 * (MAX_MESSAGE_CHARS + 100)
    assert [s.method for s in agent.seen] == ["GET"], "only the card was fetched"


class _Failing(a2a_pb2_grpc.A2AServiceServicer):  # type: ignore[misc]
    """Fails every ``SendMessage`` with :attr:`code` and :attr:`message`, the status details
    :attr:`details` (none when ``None``)."""

    def __init__(self) -> None:
        self.code = grpc.StatusCode.INTERNAL
        self.message = ""
        self.details: bytes | None = None

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        trailers = () if self.details is None else (("grpc-status-details-bin", self.details),)
        await context.abort(self.code, self.message, trailing_metadata=trailers)


@contextlib.asynccontextmanager
async def _grpc_agent(failing: _Failing) -> AsyncIterator[str]:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(failing, server)  # type: ignore[no-untyped-call]
    address = f"127.0.0.1:{free_port()}"
    assert server.add_insecure_port(address)
    await server.start()
    card = agent_card(address, versions=("1.0",), binding="GRPC")
    try:
        async with running_server(Starlette(routes=create_agent_card_routes(card))) as url:
            yield url
    finally:
        await server.stop(0)


@pytest.mark.parametrize(
    ("code", "message", "details", "expected"),
    [
        # As a 0.3 agent names its error: typed by the name.
        (grpc.StatusCode.NOT_FOUND, "TaskNotFoundError: " + "m" * LONG, None, TaskNotFoundError),
        # No name, no details: the status code says it.
        (grpc.StatusCode.INTERNAL, "m" * LONG, None, A2AServerError),
        # Details that are no google.rpc.Status: the SDK fails reading them.
        (grpc.StatusCode.INTERNAL, "m" * LONG, b"\xff\xff\xff", A2AServerError),
    ],
    ids=["named", "plain", "corrupt-details"],
)
async def test_a_long_grpc_status_is_not_printed_whole_behind_the_typed_error(
    code: grpc.StatusCode, message: str, details: bytes | None, expected: type[Exception]
) -> None:
    failing = _Failing()
    failing.code, failing.message, failing.details = code, message, details
    async with (
        _grpc_agent(failing) as url,
        A2AClient(url, timeout=30) as client,
    ):
        with pytest.raises(expected) as caught:
            await client.send_message("hi")
    error = caught.value
    assert len(error.message) < MAX_MESSAGE_CHARS + 100
    assert error.message.endswith(" characters)")  # cut, saying how long it was
    # What logger.exception() prints: the error and every one shown behind it.
    printed = "".join(traceback.format_exception(error))
    assert "m" * (MAX_MESSAGE_CHARS + 1) not in printed
    # Nor is any held behind it: ``from None`` only hid the SDK's error, still its context.
    assert (error.__cause__, error.__context__) == (None, None)
    assert "During handling" not in printed and "AioRpcError" not in printed


@dataclass
class _StillWorking(StubAgent):
    """Streams one task, :attr:`task_id`, working; then nothing until the caller hangs up."""

    task_id: str = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await super().__call__(scope, receive, send)
            return
        body = b""
        while (message := await receive())["type"] == "http.request":
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        working = {
            "id": self.task_id,
            "contextId": "c-1",
            "status": {"state": "TASK_STATE_WORKING"},
        }
        answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": {"task": working}}
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        event = f"data: {json.dumps(answer)}\n\n".encode()
        await send({"type": "http.response.body", "body": event, "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass


async def test_the_cli_waiting_line_cuts_a_megabyte_task_id() -> None:
    agent = _StillWorking(task_id="i" * MEGABYTE)
    async with running_server(agent) as url:
        agent.card = card_for(url, "JSONRPC", "1.0")
        code, out, err = await cli("call", url, "--text", "hi", "--timeout", "4")
    assert code == 6 and out == "", err[:300]
    waiting, timed_out = err.splitlines()
    assert waiting.startswith("task iii") and waiting.endswith("... (cut)")
    assert timed_out.startswith("error: task iii") and timed_out.endswith("... (cut)")
    assert max(len(waiting), len(timed_out)) < MAX_ERROR_LINE + 20
