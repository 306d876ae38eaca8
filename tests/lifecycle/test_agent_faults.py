"""Failures the caller cannot fix are not answered as its fault.

A task skill whose module's output fails its output schema ends ``failed`` with "Module
output does not match its schema" (code ``SCHEMA_VALIDATION_ERROR``) in its status
message; before, the call was answered -32602 Invalid params (HTTP 400,
``INVALID_ARGUMENT``) and the task was left ``failed`` with apcore's field errors. Input that
does not validate stays invalid params.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import Task, TaskState
from apcore import Executor, Registry
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from tests._sdk import make_client, request

from .._support import free_port, running_server
from ._client import collect, parts_data

BINDINGS = [
    ("JSONRPC", "1.0"),
    ("HTTP+JSON", "1.0"),
    ("GRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "0.3"),
]
#: skill -> its task's status message: text, then data
FAILED = {
    "task.bad_output": [
        "Module output does not match its schema",
        {
            "code": "SCHEMA_VALIDATION_ERROR",
            "message": "Module output does not match its schema",
            "type": "SchemaValidationError",
        },
    ],
}


class In(BaseModel):
    text: str = ""


class Out(BaseModel):
    said: str


class _Task:
    input_schema = In
    output_schema = Out
    description = "Answer on a task"


class BadOutput(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"not": "said"}


@contextlib.asynccontextmanager
async def _agent(**settings: Any) -> AsyncIterator[str]:
    registry = Registry()
    registry.register("task.bad_output", BadOutput())
    port = free_port()
    app, _ = A2AServerFactory(
        Executor(registry), environ={}, port=port, grpc_port=free_port(), **settings
    ).create()
    async with running_server(app, port=port) as url:
        yield url


def _task(events: list[Any]) -> Task:
    kind = events[-1].WhichOneof("payload")
    assert kind == "task", events
    task: Task = events[-1].task
    return task


async def _send(client: Any, skill: str, data: dict[str, Any], **ids: str) -> Task:
    return _task(await collect(client.send_message(request(skill, data, **ids))))


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_a_module_failure_the_caller_cannot_fix_fails_its_task(
    binding: str, version: str
) -> None:
    async with _agent() as url:
        client = await make_client(url, binding, version)
        try:
            for skill, status in FAILED.items():
                task = await _send(client, skill, {"text": "hi"})
                assert task.status.state == TaskState.TASK_STATE_FAILED, skill
                assert parts_data(task.status.message.parts) == status, skill
            # The caller's own input that does not validate is still its fault.
            with pytest.raises(Exception) as refused:
                await _send(client, "task.bad_output", {"text": 5})
        finally:
            await client.close()
        answer = f"{type(refused.value).__name__}: {refused.value}"
        if (binding, version) == ("HTTP+JSON", "0.3"):  # the SDK's 0.3 REST client
            assert "HTTP Error 400" in answer, answer
        else:
            assert answer.startswith("InvalidParamsError: "), answer
