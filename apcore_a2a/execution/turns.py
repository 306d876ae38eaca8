"""A parked task and the next message on it: approvals, and modules that ask for input.

An ``ApprovalPendingError`` from apcore, or an :class:`~apcore_a2a.adapters.outputs.InputRequired`
(``AuthRequired``) from the module, parks the task in ``input-required`` (``auth-required``)
and records what is needed in the task metadata (``apcore.approval``, ``apcoreInput``;
docs/lifecycle.md), so the answer can be taken on any replica, now or after a restart. The
next message on the task (:func:`resume`) is read, in this order, as

1. the answer to a pending approval: approve (the module runs again on the input that
   asked, with apcore's ``_approval_token``), reject, or neither (asked again);
2. the answer to a pending question: the module runs again on the asking call's input
   updated by the answer (:func:`follow_up_input`); an answer that cannot be read asks
   again, naming what was wrong;
3. otherwise, fresh input: the skill runs again on the message's own input.

In cluster mode the resumed module starts only once ``working`` is stored
(:class:`StoredWorking`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import RequestContext
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES as _WAITING
from a2a.server.context import ServerCallContext
from a2a.types import Message, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from apcore.builtin_steps import BuiltinApprovalGate

from apcore_a2a._history import message_in
from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.adapters.outputs import AuthRequired, InputRequired
from apcore_a2a.adapters.parts import input_from_parts, value_to_python
from apcore_a2a.adapters.schema import SchemaFacts, coerce_integers
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.edge.call import call_of
from apcore_a2a.errors import TaskBusyError
from apcore_a2a.execution.identity import gate_holding
from apcore_a2a.execution.routing import SKILL_METADATA_KEY
from apcore_a2a.execution.runs import Run

logger = logging.getLogger("apcore_a2a.executor")

#: task metadata key of a pending question
INPUT_KEY = "apcoreInput"
#: a reserved apcore input key; only a resume on the A2A task may set it
RESUME_KEY = "_approval_token"

_APPROVE_WORDS = re.compile(r"^\s*(approve|approved|yes|y|ok|allow)\b", re.IGNORECASE)
_REJECT_WORDS = re.compile(r"^\s*(reject|rejected|deny|denied|no|n|decline)\b", re.IGNORECASE)


def without_token(inputs: dict[str, Any] | None) -> dict[str, Any]:
    """Client input minus ``_approval_token``: a client-chosen token would skip approval."""
    return {k: v for k, v in (inputs or {}).items() if k != RESUME_KEY}


async def submit(run: Run, message: Message, spec: SkillSpec) -> None:
    """Emit the submitted ``Task`` a new task starts with (history: the user message)."""
    task = new_task(run.task_id, run.context_id, TaskState.TASK_STATE_SUBMITTED, history=[message])
    task.status.timestamp.GetCurrentTime()
    task.metadata.update({SKILL_METADATA_KEY: spec.module_id})
    await run.emit(task)


def _metadata_entry(task: Task, key: str) -> dict[str, Any] | None:
    if not task.HasField("metadata") or key not in task.metadata.fields:
        return None
    entry = value_to_python(task.metadata.fields[key])
    return entry if isinstance(entry, dict) else None


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """An approval a task waits on (apcore's ``ApprovalPendingError``, as recorded)."""

    approval_id: str
    module_id: str
    reason: str
    #: the message whose input asked for approval: an approval resumes exactly that input
    message_id: str = ""

    def facts(self) -> dict[str, Any]:
        return {"approvalId": self.approval_id, "moduleId": self.module_id, "reason": self.reason}

    def metadata(self, status: str) -> dict[str, Any]:
        """Task metadata recording this approval as *status* (pending, approved, rejected)."""
        entry = {**self.facts(), "messageId": self.message_id, "status": status}
        return {"apcore": {"approval": entry}}


async def ask_approval(run: Run, exc: Any, module_id: str, message_id: str) -> None:
    """Park the task in ``input-required`` for the ``ApprovalPendingError`` *exc* (raised
    for *module_id*, or for a module it calls), asked by the input of *message_id*. A run
    that resumed the approval of one module it calls, asking for another's, ends the task
    ``failed``: approved, the other would run *module_id* again, and the first module on
    an approval used already (which asks again: never done)."""
    skill, module_id = module_id, str(getattr(exc, "module_id", None) or module_id)
    used = run.approved["moduleId"] if run.approved else module_id
    if used not in (module_id, skill):  # the skill's own gate may ask again, as before
        said = (
            f"{skill} calls {used} and then {module_id}, each requiring approval: it cannot "
            f"be resumed past {module_id}, as that would run {used} again"
        )
        data = {"code": "APPROVAL_NOT_RESUMABLE", "message": said, "type": "ApprovalPending"}
        await run.status(TaskState.TASK_STATE_FAILED, run.message(said, data))
        return
    approval_id = getattr(exc, "approval_id", None) or uuid.uuid4().hex
    reason = getattr(exc, "reason", None) or f"Approval required to run {module_id}"
    pending = PendingApproval(str(approval_id), module_id, sanitize(str(reason), 300), message_id)
    await _ask_approval(run, pending)


async def _ask_approval(run: Run, pending: PendingApproval, *, again: bool = False) -> None:
    prefix = "Still waiting for approval" if again else "Approval required"
    text = (
        f"{prefix} to run {pending.module_id}: {pending.reason}. "
        'Reply with {"approved": true} to approve or {"approved": false, "reason": "..."} '
        f"(or the text approve / reject) to decide. Approval id: {pending.approval_id}."
    )
    expected = {"approved": "boolean", "reason": "string (optional)"}
    data = {**pending.facts(), "code": "APPROVAL_PENDING", "expected": expected}
    state = TaskState.TASK_STATE_INPUT_REQUIRED
    await run.status(state, run.message(text, data), pending.metadata("pending"))


def _pending_approval(task: Task) -> PendingApproval | None:
    """The approval a stored task is waiting for, if any."""
    entry = (_metadata_entry(task, "apcore") or {}).get("approval")
    if not isinstance(entry, dict) or not entry.get("approvalId"):
        return None
    if entry.get("status", "pending") != "pending":
        return None  # already decided: a later message is new input, not an answer
    return PendingApproval(
        str(entry["approvalId"]),
        str(entry.get("moduleId", "")),
        str(entry.get("reason", "")),
        str(entry.get("messageId", "")),
    )


def _read_decision(message: Message) -> tuple[bool, str | None] | None:
    """An approve/reject answer (and its reason) in a follow-up message, if it holds one."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            value = value_to_python(part.data)
            if isinstance(value, dict) and isinstance(value.get("approved"), bool):
                reason = value.get("reason")
                return value["approved"], sanitize(reason, 300) if reason else None
        elif kind == "text":
            if _APPROVE_WORDS.match(part.text):
                return True, None
            if _REJECT_WORDS.match(part.text):
                rest = _REJECT_WORDS.sub("", part.text, count=1).strip(" :,-.")
                return False, sanitize(rest, 300) or None
    return None


def _asking_message(task: Task, pending: PendingApproval) -> Message | None:
    """The message of *task*'s history whose input *pending* was raised for."""
    if not pending.message_id:
        # Tasks parked before the message id was recorded: their first message asked.
        return task.history[0] if task.history else None
    return message_in(task.history, pending.message_id)


async def _approval_answered(
    executor: Any,
    run: Run,
    stored: Task,
    message: Message,
    spec: SkillSpec,
    pending: PendingApproval,
) -> dict[str, Any] | None:
    decision = _read_decision(message)
    if decision is None:
        await _ask_approval(run, pending, again=True)
        return None
    approved, reason = decision
    # Tell an approval handler that understands A2A decisions what the user said.
    handler = gate_holding(executor, BuiltinApprovalGate, "handler")
    record = getattr(handler, "record_decision", None)
    if callable(record):
        record(pending.approval_id, approved, reason)
    decided = pending.metadata("approved" if approved else "rejected")
    if not approved:
        reason = reason or "Rejected by user"
        data = {"code": "APPROVAL_DENIED", "message": reason, "type": "ApprovalRejected"}
        said = run.message(f"Approval rejected: {reason}", data)
        await run.status(TaskState.TASK_STATE_REJECTED, said, decided)
        return None
    # Re-run on the input that asked for approval, never on the approving message.
    original = _asking_message(stored, pending)
    if original is None:
        lost = "The input this approval was for is no longer in the task history"
        await run.status(TaskState.TASK_STATE_FAILED, run.message(lost, {}))
        return None
    # An approval asked for by the run that took an answer resumes that run's input.
    answered = _asked(stored, answered_by=original.message_id)
    if answered is not None:
        inputs = follow_up_input(answered, original, spec.input_facts)
    else:
        inputs = without_token(input_from_parts(original.parts, spec.input_facts))
    inputs[RESUME_KEY] = pending.approval_id
    run.input_of = original.message_id  # asked again, the approval resumes this input
    if pending.module_id != spec.module_id:  # asked by a call the module makes
        run.approved = {"approvalId": pending.approval_id, "moduleId": pending.module_id}
    await run.status(TaskState.TASK_STATE_WORKING, metadata=decided)
    return inputs


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


async def _question(run: Run, pending: PendingInput, text: str, extra: dict[str, Any]) -> None:
    data: dict[str, Any] = {
        "code": "AUTH_REQUIRED" if pending.auth else "INPUT_REQUIRED",
        "prompt": pending.prompt,
    }
    if pending.field:
        data["field"] = pending.field
    if pending.auth and pending.scheme:
        data["scheme"] = pending.scheme
    state = (
        TaskState.TASK_STATE_AUTH_REQUIRED if pending.auth else TaskState.TASK_STATE_INPUT_REQUIRED
    )
    message = run.message(text, {**data, **extra})
    await run.status(state, message, {INPUT_KEY: pending.entry("pending")})


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


async def ask(run: Run, asked: InputRequired, message_id: str, inputs: dict[str, Any]) -> None:
    """Park the task in ``input-required`` (``auth-required``): the module asked *asked*
    while running on *inputs*."""
    prompt = sanitize(asked.prompt, 1000)
    scheme = getattr(asked, "scheme", None)
    scheme = sanitize(scheme, 100) if scheme else None
    inputs = _plain(without_token(inputs))
    auth = isinstance(asked, AuthRequired)
    pending = PendingInput(prompt, asked.field, message_id, inputs, auth, scheme)
    await _question(run, pending, prompt, {"data": _plain(asked.data)} if asked.data else {})


async def reask(run: Run, pending: PendingInput, error: str) -> None:
    """The same question again: the answer could not be used (*error* says why)."""
    error = sanitize(error, 300)
    await _question(run, pending, f"{error}. {pending.prompt}", {"error": error})


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


def _asked(task: Task, answered_by: str | None = None) -> PendingInput | None:
    """The question *task* waits on or, given *answered_by*, the one that message answered
    (for an approval that the answer's run asked for)."""
    entry = _metadata_entry(task, INPUT_KEY) or {}
    if answered_by is None:
        found = task.status.state in _WAITING and entry.get("status") == "pending"
    else:
        answered = entry.get("status") == "answered"
        found = bool(answered_by) and answered and entry.get("answeredBy") == answered_by
    return _pending(entry) if found else None


def follow_up_input(pending: PendingInput, message: Message, facts: SchemaFacts) -> dict[str, Any]:
    """The asking call's input updated by the answer in *message*: converted like a new
    message's input (with a ``field``, its text fills that field), its keys replace the
    asking call's. Raises ``InvalidParamsError`` when the answer cannot be converted."""
    texts = [p.text for p in message.parts if p.WhichOneof("content") == "text"]
    if pending.field and texts:
        others = [p for p in message.parts if p.WhichOneof("content") != "text"]
        answer = input_from_parts(others, facts) if others else {}
        answer.setdefault(pending.field, "\n".join(texts))
    else:
        answer = input_from_parts(message.parts, facts)
    return without_token(coerce_integers({**pending.inputs, **answer}, facts))


async def resume(
    executor: Any, run: Run, stored: Task, context: RequestContext, spec: SkillSpec
) -> dict[str, Any] | None:
    """Emit ``working`` and return the inputs for the follow-up of *context* on *stored*
    (the task as a2a-sdk read it for the run), or ``None`` if it ended here."""
    claimed = getattr(call_of(context.call_context), "claimed", None)
    now = (stored.status.state, stored.status.timestamp)
    if claimed is not None and (claimed.state, claimed.timestamp) != now:
        # Past the wait it claimed: taken over while this replica paused (its claim judged
        # dead). Refused before anything is saved, its message stays out of the history.
        taken_over(context)
        return None
    message = context.message
    assert message is not None  # the executor runs only a routed message
    approval = _pending_approval(stored)
    if approval is not None and stored.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return await _approval_answered(executor, run, stored, message, spec, approval)
    pending = _asked(stored)
    if pending is None:
        # Not an answer to anything: the follow-up's own input re-runs the skill.
        inputs = without_token(input_from_parts(message.parts, spec.input_facts))
        await run.status(TaskState.TASK_STATE_WORKING)
        return inputs
    try:
        inputs = follow_up_input(pending, message, spec.input_facts)
    except InvalidParamsError as exc:
        await reask(run, pending, exc.message)
        return None
    run.answering = pending
    answered = {INPUT_KEY: {**pending.entry("answered"), "answeredBy": message.message_id}}
    await run.status(TaskState.TASK_STATE_WORKING, metadata=answered)
    return inputs


class StoredWorking:
    """Runs waiting for their task's ``working`` save; :meth:`saved` is a save listener.

    A message that continues a parked task (an approval, an answer to a question) emits
    ``working``, and the module would start at once: the SDK saves the event afterwards, in
    its own task. A cancel another replica stored meanwhile made that save fail only once
    the module had run: a payment made on a task that stayed ``canceled``, its approval
    never recorded. Waiting for the save puts the two in the store's order: a cancel stored
    first fails the save, and the SDK cancels the run before the module starts; a cancel
    stored after it cancels a running module (docs/reliability.md). One process orders a
    cancel and a run itself, so it does not wait (cluster mode only)."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[bool]] = {}
        self._standing: Callable[[str], Awaitable[bool] | None] | None = None

    def follow(
        self,
        on_save: Callable[[Callable[[Task, ServerCallContext], None]], object],
        standing: Callable[[str], Awaitable[bool] | None],
    ) -> None:
        """Listen to the store's saves with *on_save*, after the turn claims' own listener,
        whose deletion of a claim past its turn *standing* (``TurnClaims.standing``) tells of."""
        self._standing = standing
        on_save(self.saved)

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """Tell the run waiting for *task* that its ``working`` status is stored, and
        whether its claim of the wait still stood then."""
        if task.status.state != TaskState.TASK_STATE_WORKING:
            return
        waiting = self._waiting.pop(task.id, None)
        if waiting is None or waiting.done():
            return
        standing = self._standing(task.id) if self._standing is not None else None
        if standing is None:
            waiting.set_result(True)
        else:
            asyncio.ensure_future(standing).add_done_callback(functools.partial(_settle, waiting))

    @contextlib.contextmanager
    def expected(self, run: Run) -> Iterator[asyncio.Future[bool]]:
        """Watch for the next ``working`` save of *run*'s task (before it is emitted: the
        save may land first); await the yielded future once it is emitted: whether the
        follow-up's claim still stood at that save (else another replica took it over, and
        runs the turn). A save refused by a cancel stored first cancels the waiting run
        (the SDK does); a save that failed stops it (``Run.stop``: the future is
        cancelled), as a2a-sdk's run ended there and no save of it would come."""
        task_id = run.task_id
        waiting = self._waiting[task_id] = asyncio.get_running_loop().create_future()
        run.waiting = waiting
        try:
            yield waiting
        finally:
            if self._waiting.get(task_id) is waiting:
                del self._waiting[task_id]
            waiting.cancel()


def _settle(waiting: asyncio.Future[bool], standing: asyncio.Future[bool]) -> None:
    if not waiting.done():  # not known (the replica stopping): the run goes on, as before
        known = not standing.cancelled() and standing.exception() is None
        waiting.set_result(standing.result() if known else True)


def taken_over(context: RequestContext) -> None:
    """Refuse a follow-up busy whose claim of its task's wait another replica took over
    before this one saved the task ``working`` (this replica was paused longer than the
    replica timeout): that replica runs the turn, so the module does not run here."""
    logger.warning("task %s: its wait was continued by another replica", context.task_id)
    call = call_of(context.call_context)
    if call is not None:
        call.refused = TaskBusyError(message="Task is busy: another message continued it")
