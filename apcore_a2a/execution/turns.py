"""Follow-up messages on a parked task, and modules that ask the caller for input.

A module raises :class:`~apcore_a2a.adapters.outputs.InputRequired`: the task parks in
``input-required`` with the prompt as its status message, and the task metadata keeps
``apcoreInput = {prompt, field, messageId, input, status: "pending"}`` -- ``input`` is
the input the asking call ran with -- so the answer can be taken here or on another
replica, now or after a restart. :class:`~apcore_a2a.adapters.outputs.AuthRequired` is
the same question in ``auth-required`` (the entry adds ``auth: true`` and ``scheme``).

The next message on the task (:func:`resume`) is read, in this order, as

1. the answer to a pending approval (``execution/approvals.py``), exactly as before;
2. the answer to a pending question: the module runs again on the asking call's input
   updated by the answer (:func:`follow_up_input`); an answer that cannot be read asks
   again, naming what was wrong;
3. otherwise, fresh input: the skill runs again on the message's own input.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES as _WAITING
from a2a.server.events import EventQueue
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.adapters.outputs import AuthRequired, InputRequired
from apcore_a2a.adapters.parts import input_from_parts, value_to_python
from apcore_a2a.adapters.schema import SchemaFacts, coerce_integers
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.execution import approvals
from apcore_a2a.execution.events import status_event
from apcore_a2a.execution.routing import SKILL_METADATA_KEY
from apcore_a2a.execution.runs import Run

__all__ = [
    "INPUT_KEY",
    "RESUME_KEY",
    "PendingInput",
    "asked_event",
    "follow_up_input",
    "new_task",
    "pending_input",
    "reask_event",
    "resume",
    "without_token",
]

#: task metadata key of a pending question
INPUT_KEY = "apcoreInput"
#: a reserved apcore input key; only a resume on the A2A task may set it
RESUME_KEY = "_approval_token"


@dataclass(frozen=True, slots=True)
class PendingInput:
    """A question a task waits on: what was asked, and the input of the call that asked."""

    prompt: str
    field: str | None
    message_id: str
    inputs: dict[str, Any]
    #: asked in ``auth-required`` (:class:`AuthRequired`), with this scheme
    auth: bool = False
    scheme: str | None = None

    def as_context_data(self) -> dict[str, Any]:
        """What the module sees in ``Context.data["a2a.follow_up"]`` when it is answered."""
        seen: dict[str, Any] = {"prompt": self.prompt, "field": self.field}
        if self.auth:
            seen["scheme"] = self.scheme
        return seen

    def entry(self, status: str) -> dict[str, Any]:
        """The ``apcoreInput`` task-metadata entry of this question."""
        entry: dict[str, Any] = {
            "prompt": self.prompt,
            "messageId": self.message_id,
            "input": self.inputs,
            "status": status,
        }
        if self.field:
            entry["field"] = self.field
        if self.auth:
            entry.update(auth=True, scheme=self.scheme)
        return entry


def without_token(inputs: dict[str, Any] | None) -> dict[str, Any]:
    """Client input minus ``_approval_token``: a client-chosen token would skip approval."""
    return {k: v for k, v in (inputs or {}).items() if k != RESUME_KEY}


def new_task(context_id: str, task_id: str, message: Message, spec: SkillSpec) -> Task:
    """The submitted ``Task`` a new task starts with (history: the user message)."""
    task = Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        history=[message],
    )
    task.status.timestamp.GetCurrentTime()
    task.metadata.update({SKILL_METADATA_KEY: spec.module_id})
    return task


def _plain(inputs: dict[str, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(without_token(inputs), default=str))
    return plain


def _question(
    task_id: str, context_id: str, pending: PendingInput, text: str, extra: dict[str, Any]
) -> TaskStatusUpdateEvent:
    code = "AUTH_REQUIRED" if pending.auth else "INPUT_REQUIRED"
    data: dict[str, Any] = {"code": code, "prompt": pending.prompt}
    if pending.field:
        data["field"] = pending.field
    if pending.auth and pending.scheme:
        data["scheme"] = pending.scheme
    data.update(extra)
    data_part = Part()
    data_part.data.struct_value.update(data)
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text), data_part],
    )
    state = (
        TaskState.TASK_STATE_AUTH_REQUIRED if pending.auth else TaskState.TASK_STATE_INPUT_REQUIRED
    )
    return status_event(
        task_id, context_id, state, message, metadata={INPUT_KEY: pending.entry("pending")}
    )


def asked_event(
    task_id: str, context_id: str, asked: InputRequired, message_id: str, inputs: dict[str, Any]
) -> TaskStatusUpdateEvent:
    """``input-required`` (``auth-required``) for the question a module raised while
    running on *inputs*."""
    prompt = sanitize(asked.prompt, 1000)
    auth = isinstance(asked, AuthRequired)
    scheme = (
        sanitize(asked.scheme, 100) if isinstance(asked, AuthRequired) and asked.scheme else None
    )
    pending = PendingInput(prompt, asked.field, message_id, _plain(inputs), auth, scheme)
    extra = {"data": json.loads(json.dumps(asked.data, default=str))} if asked.data else {}
    return _question(task_id, context_id, pending, prompt, extra)


def reask_event(
    task_id: str, context_id: str, pending: PendingInput, error: str
) -> TaskStatusUpdateEvent:
    """The same question again: the answer could not be used (*error* says why)."""
    error = sanitize(error, 300)
    return _question(task_id, context_id, pending, f"{error}. {pending.prompt}", {"error": error})


def _entry(task: Task) -> dict[str, Any] | None:
    if not task.HasField("metadata") or INPUT_KEY not in task.metadata.fields:
        return None
    entry = value_to_python(task.metadata.fields[INPUT_KEY])
    return entry if isinstance(entry, dict) else None


def _pending(entry: dict[str, Any]) -> PendingInput:
    inputs = entry.get("input")
    field, scheme = entry.get("field"), entry.get("scheme")
    return PendingInput(
        str(entry.get("prompt", "")),
        str(field) if field else None,
        str(entry.get("messageId", "")),
        inputs if isinstance(inputs, dict) else {},
        entry.get("auth") is True,
        str(scheme) if scheme else None,
    )


def pending_input(task: Task) -> PendingInput | None:
    """The question a stored task waits on, if it waits on one."""
    if task.status.state not in _WAITING:
        return None
    entry = _entry(task)
    if entry is None or entry.get("status") != "pending":
        return None
    return _pending(entry)


def _answered_by(task: Task, message_id: str) -> PendingInput | None:
    """The question *message_id* answered (for an approval that answer's run asked)."""
    entry = _entry(task)
    if entry is None or entry.get("status") != "answered" or not message_id:
        return None
    return _pending(entry) if entry.get("answeredBy") == message_id else None


def follow_up_input(pending: PendingInput, message: Message, facts: SchemaFacts) -> dict[str, Any]:
    """The asking call's input updated by the answer in *message* (the merge rule).

    The answer is converted like a new message's input, except that with a ``field`` its
    text fills that field; its keys then replace the same keys of the asking call's
    input. Raises ``InvalidParamsError`` when the answer cannot be converted.
    """
    texts = [p.text for p in message.parts if p.WhichOneof("content") == "text"]
    if pending.field and texts:
        others = [p for p in message.parts if p.WhichOneof("content") != "text"]
        answer = input_from_parts(others, facts) if others else {}
        answer.setdefault(pending.field, "\n".join(texts))
    else:
        answer = input_from_parts(message.parts, facts)
    merged: dict[str, Any] = coerce_integers({**pending.inputs, **answer}, facts)
    return without_token(merged)


def _answered(pending: PendingInput, message: Message) -> dict[str, Any]:
    return {INPUT_KEY: {**pending.entry("answered"), "answeredBy": message.message_id}}


async def resume(
    executor: Any,
    run: Run,
    stored: Task,
    message: Message,
    spec: SkillSpec,
    event_queue: EventQueue,
) -> tuple[dict[str, Any], TaskStatusUpdateEvent] | None:
    """Inputs and ``working`` event for a follow-up, or ``None`` if it ended here."""
    reply = approvals.answer(stored, message, executor)
    if reply is not None:
        if reply.resume_token is None:
            await run.emit(event_queue, reply.event)
            return None
        # Re-run on the input that asked for approval, never on the approving message.
        pending_approval = approvals.pending_approval(stored)
        original = (
            approvals.asking_message(stored, pending_approval)
            if pending_approval is not None
            else None
        )
        if original is None:
            await run.emit(event_queue, approvals.lost_input_event(stored))
            return None
        # An approval asked for by the run that took an answer resumes that run's input.
        answered = _answered_by(stored, original.message_id)
        if answered is not None:
            inputs = follow_up_input(answered, original, spec.input_facts)
        else:
            inputs = without_token(input_from_parts(original.parts, spec.input_facts))
        inputs[RESUME_KEY] = reply.resume_token
        return inputs, reply.event
    pending = pending_input(stored)
    if pending is not None:
        try:
            inputs = follow_up_input(pending, message, spec.input_facts)
        except InvalidParamsError as exc:
            await run.emit(
                event_queue, reask_event(stored.id, stored.context_id, pending, exc.message)
            )
            return None
        run.answering = pending
        working = status_event(
            stored.id,
            stored.context_id,
            TaskState.TASK_STATE_WORKING,
            metadata=_answered(pending, message),
        )
        return inputs, working
    # Not an answer to anything: the follow-up's own input re-runs the skill.
    working = status_event(stored.id, stored.context_id, TaskState.TASK_STATE_WORKING)
    return without_token(input_from_parts(message.parts, spec.input_facts)), working
