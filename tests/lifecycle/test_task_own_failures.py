"""A task skill's own failure after its task exists is the task's state, on every cell.

Once a task skill's task is made (``submitted``, ``working``), what its module does wrong
is no longer the caller's request to refuse: A2A 1.0.1 §3.3.2 has a server validate the
input "before processing", and the agent answers every other failure of a run that way
(a crash, a timeout, a call the module makes). A module that refuses its own input itself
(``InvalidInputError``, ``SchemaValidationError``) left the task ``failed`` without its
reason and answered -32602 Invalid params as if the request were wrong, a2a-sdk logged
"Producer ... Execution failed" with a traceback at ERROR, and REST 0.3 streams were cut
("peer closed connection without sending complete message body"). Now the task ends
``failed`` with the module's words in its status message, on JSON-RPC, REST and gRPC, 1.0
and 0.3, send and stream, each stream ending with that event. A streaming module's chunk
that is no object (a string, a list: apcore refuses it as ``GENERAL_INVALID_INPUT``) is
the module's output fault, not the caller's input: "Module execution failed"
(``MODULE_EXECUTE_ERROR``), for a message reply -32603 / HTTP 500 / ``INTERNAL``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import TaskState
from apcore import ACL, ACLRule, Executor, Registry
from apcore.errors import InvalidInputError, SchemaValidationError

from apcore_a2a import A2AServerFactory
from tests._sdk import make_client, request

from .._support import free_port, running_server
from ._client import BINDINGS, collect, parts_data, summarize
from ._modules import MaybeText as In
from ._modules import SaidOut as Out

FAILED = "Module execution failed"
#: skill -> its task's status message (text, data) and the level the agent logs it at
OWN = {
    "own.invalid": (
        ["my own input is bad", {"code": "GENERAL_INVALID_INPUT",
         "message": "my own input is bad", "type": "InvalidInputError"}],
        logging.INFO,
    ),
    "own.schema": (
        ["text is not allowed here", {"code": "SCHEMA_VALIDATION_ERROR",
         "message": "text is not allowed here", "type": "SchemaValidationError",
         "errors": [{"field": "/text", "message": "not here"}]}],
        logging.INFO,
    ),
    "own.string_chunk": (
        [FAILED, {"code": "MODULE_EXECUTE_ERROR", "message": FAILED, "type": "ModuleExecuteError"}],
        logging.ERROR,
    ),
    "own.list_chunk": (
        [FAILED, {"code": "MODULE_EXECUTE_ERROR", "message": FAILED, "type": "ModuleExecuteError"}],
        logging.ERROR,
    ),
}  # fmt: skip


class _Task:
    input_schema = In
    output_schema = Out
    description = "Answer on a task"


class OwnInvalid(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InvalidInputError("my own input is bad")


class OwnSchema(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        errors = [{"path": "/text", "message": "not here"}]
        raise SchemaValidationError("text is not allowed here", errors)


class _Streams(_Task):
    chunk: Any = None

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"said": "whole"}

    async def stream(self, inputs: dict[str, Any], context: Any) -> AsyncIterator[Any]:
        yield self.chunk


class StringChunk(_Streams):
    chunk = "a string where an object belongs"


class ListChunk(_Streams):
    chunk = [1, 2]


class ReplyOfChunks(_Task):
    """A message-reply skill whose module reads ``own.string_chunk``'s stream."""

    metadata = {"a2a": {"reply": "message"}}

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        async for _chunk in context.executor.stream("own.string_chunk", {}, context):
            pass
        return {"said": "read"}


@contextlib.asynccontextmanager
async def _agent() -> AsyncIterator[str]:
    registry = Registry()
    for skill, module in (
        ("own.invalid", OwnInvalid()),
        ("own.schema", OwnSchema()),
        ("own.string_chunk", StringChunk()),
        ("own.list_chunk", ListChunk()),
        ("own.reply", ReplyOfChunks()),
    ):
        registry.register(skill, module)
    acl = ACL(rules=[ACLRule(callers=["*"], targets=["*"], effect="allow")])
    port = free_port()
    app, _ = A2AServerFactory(
        Executor(registry, acl=acl), environ={}, port=port, grpc_port=free_port()
    ).create()
    async with running_server(app, port=port) as url:
        yield url


def _errors(records: list[logging.LogRecord]) -> list[tuple[str, str]]:
    return [(r.name, r.getMessage()[:80]) for r in records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_task_skills_own_failure_fails_its_task_with_its_reason(
    binding: str, version: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with _agent() as url:
        client = await make_client(url, binding, version, streaming=streaming)
        try:
            for skill, (status, level) in OWN.items():
                caplog.clear()
                events = await collect(client.send_message(request(skill, {"text": "hi"})))
                records = list(caplog.records)
                last = events[-1]
                if streaming:
                    assert summarize(events[0]) == ("task", "SUBMITTED"), skill
                    assert summarize(last) == ("status", "FAILED"), skill
                    final = last.status_update.status
                else:
                    assert summarize(last) == ("task", "FAILED"), skill
                    final = last.task.status
                assert final.state == TaskState.TASK_STATE_FAILED
                assert parts_data(final.message.parts) == status, skill
                ours = [r for r in records if r.name == "apcore_a2a.executor"]
                assert [(r.levelno, r.getMessage().split(":")[0]) for r in ours] == [
                    (level, f"Skill {skill} failed")
                ], skill
                # Only the agent's own record of a module's fault is an ERROR; no SDK one.
                assert _errors(records) == _errors(ours), skill
            caplog.clear()
            with pytest.raises(Exception) as refused:
                await collect(client.send_message(request("own.reply", {"text": "hi"})))
        finally:
            await client.close()
        answer = f"{type(refused.value).__name__}: {refused.value}"
        if (binding, version) == ("HTTP+JSON", "0.3"):  # the SDK's 0.3 REST client
            assert "HTTP Error 500" in answer, answer
        else:
            assert answer == f"InternalError: {FAILED}", answer
