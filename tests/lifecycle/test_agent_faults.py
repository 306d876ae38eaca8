"""Failures the caller cannot fix are not answered as its fault, and not masked.

A task skill whose module's output fails its output schema ends ``failed`` with "Module
output does not match its schema" (code ``SCHEMA_VALIDATION_ERROR``) in its status
message; before, the call was answered -32602 Invalid params (HTTP 400,
``INVALID_ARGUMENT``) and the task was left ``failed`` with apcore's field errors. Input that
does not validate stays invalid params. A call the module makes that the ACL refuses ends
the task ``failed`` with "Permission denied: ..." (code ``ACL_DENIED``), on a follow-up too;
before, the call was answered -32001 Task not found for a task the caller had just created
(or, on a follow-up, owned). A follow-up on another caller's task is still "Task not found". A call the module
makes with input the called module's schema refuses ends the task ``failed`` with "Input of
a call this skill makes does not match its schema" (code ``SCHEMA_VALIDATION_ERROR``), on a
follow-up too (its answer is not asked for again); before, it was answered -32602 Invalid
params, as if the caller's own input were wrong. So is a call whose input the called module
refuses itself (``InvalidInputError``, ``GENERAL_INVALID_INPUT``): "Input of a call this
skill makes is invalid".
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types import Task, TaskState
from apcore import ACL, ACLRule, Executor, Registry
from apcore.errors import InvalidInputError

from apcore_a2a import A2AServerFactory, InputRequired
from tests._sdk import make_client, request

from .._support import free_port, running_server
from ..auth.keys import HMAC_SECRET, bearer, hs_plain
from ._client import BINDINGS, collect, parts_data
from ._modules import MaybeText as In
from ._modules import SaidOut as Out

DENIED = "Permission denied: a call this skill makes was refused"
BAD_CALL = "Input of a call this skill makes does not match its schema"
MISSING = "A call this skill makes names no module the agent serves"
INVALID_CALL = "Input of a call this skill makes is invalid"
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
    "task.nested": [DENIED, {"code": "ACL_DENIED", "message": DENIED, "type": "ACLDeniedError"}],
    "task.bad_call": [
        BAD_CALL,
        {"code": "SCHEMA_VALIDATION_ERROR", "message": BAD_CALL, "type": "SchemaValidationError"},
    ],
    "task.missing_call": [
        MISSING,
        {"code": "MODULE_NOT_FOUND", "message": MISSING, "type": "ModuleNotFoundError"},
    ],
    "task.invalid_call": [
        INVALID_CALL,
        {"code": "GENERAL_INVALID_INPUT", "message": INVALID_CALL, "type": "InvalidInputError"},
    ],
}


class _Task:
    input_schema = In
    output_schema = Out
    description = "Answer on a task"


class BadOutput(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"not": "said"}


class AskThenBadOutput(_Task):
    """Asks for a text first (when it has none), then answers an output its schema refuses."""

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs.get("text"):
            raise InputRequired("Say something", field="text")
        return {"not": "said"}


class Nested(_Task):
    """Asks for a text first (when it has none), then calls ``task.secret``, which the
    ACL lets no module call."""

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs.get("text"):
            raise InputRequired("Say something", field="text")
        result: dict[str, Any] = await context.executor.call_async("task.secret", {}, context)
        return result


class BadCall(_Task):
    """Asks for a text first (when it has none), then calls ``task.bad_output`` with an
    input its schema refuses."""

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs.get("text"):
            raise InputRequired("Say something", field="text")
        call = context.executor.call_async("task.bad_output", {"text": 5}, context)
        result: dict[str, Any] = await call
        return result


class MissingCall(_Task):
    """Calls a module no registry holds (a name its author mistyped, a module removed)."""

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        result: dict[str, Any] = await context.executor.call_async("task.gone", {}, context)
        return result


class InvalidCall(_Task):
    """Asks for a text first (when it has none), then calls ``task.refuser``, which refuses
    the input itself."""

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        if not inputs.get("text"):
            raise InputRequired("Say something", field="text")
        result: dict[str, Any] = await context.executor.call_async("task.refuser", {}, context)
        return result


class Refuser(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InvalidInputError("a text is needed here")


class Secret(_Task):
    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"said": "secret"}


@contextlib.asynccontextmanager
async def _agent(**settings: Any) -> AsyncIterator[str]:
    registry = Registry()
    for skill, module in (
        ("task.bad_output", BadOutput()),
        ("task.ask_then_bad", AskThenBadOutput()),
        ("task.nested", Nested()),
        ("task.bad_call", BadCall()),
        ("task.missing_call", MissingCall()),
        ("task.invalid_call", InvalidCall()),
        ("task.refuser", Refuser()),
        ("task.secret", Secret()),
    ):
        registry.register(skill, module)
    acl = ACL(
        rules=[
            ACLRule(callers=["@external"], targets=["*"], effect="allow"),
            ACLRule(callers=["task.bad_call"], targets=["task.bad_output"], effect="allow"),
            ACLRule(callers=["task.missing_call"], targets=["*"], effect="allow"),
            ACLRule(callers=["task.invalid_call"], targets=["task.refuser"], effect="allow"),
        ]
    )
    port = free_port()
    app, _ = A2AServerFactory(
        Executor(registry, acl=acl), environ={}, port=port, grpc_port=free_port(), **settings
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


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
@pytest.mark.parametrize(
    ("skill", "status"),
    [
        ("task.ask_then_bad", "task.bad_output"),
        ("task.bad_call",) * 2,
        ("task.invalid_call",) * 2,
        ("task.nested",) * 2,
    ],
)
async def test_an_agent_fault_after_an_answer_fails_the_task_and_asks_nothing(
    binding: str, version: str, skill: str, status: str
) -> None:
    """The caller's answer is not asked for again for the module's own output, or for the
    input of a call it makes (that re-ask is for an answer that made the input invalid). A
    call the module makes that the ACL refuses fails the task as in a new message: it was
    answered "Task not found" for the caller's own task, left ``failed`` with those words."""
    async with _agent() as url:
        client = await make_client(url, binding, version)
        try:
            asked = await _send(client, skill, {})
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            ids = {"task_id": asked.id, "context_id": asked.context_id}
            task = await _send(client, skill, {"text": "hi"}, **ids)
        finally:
            await client.close()
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert parts_data(task.status.message.parts) == FAILED[status]


@pytest.mark.parametrize(("binding", "version"), BINDINGS[:2] + BINDINGS[3:5])
async def test_a_follow_up_on_another_callers_task_is_still_not_found(
    binding: str, version: str
) -> None:
    async with _agent(auth_key=HMAC_SECRET) as url:
        alice = await make_client(url, binding, version, headers=bearer(hs_plain(sub="alice")))
        bob = await make_client(url, binding, version, headers=bearer(hs_plain(sub="bob")))
        try:
            asked = await _send(alice, "task.nested", {})
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            ids = {"task_id": asked.id, "context_id": asked.context_id}
            with pytest.raises(Exception) as refused:
                await _send(bob, "task.nested", {"text": "hi"}, **ids)
        finally:
            await alice.close()
            await bob.close()
        answer = f"{type(refused.value).__name__}: {refused.value}"
        assert DENIED not in answer, answer
        if (binding, version) == ("HTTP+JSON", "0.3"):  # the SDK's 0.3 REST client
            assert "MethodNotFoundError: Resource not found" in answer, answer
        else:
            assert answer.startswith("TaskNotFoundError: "), answer
