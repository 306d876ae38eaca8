"""Approval as A2A ``input-required``: reading and writing the pending state.

When apcore raises ``ApprovalPendingError`` the task parks in ``input-required``; the
status message says what is needed (approval id, reason, module) as text and data, and
the same facts are kept in the task metadata under ``apcore.approval`` so a follow-up
message -- on this replica or another, now or after a restart -- can resume it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent

from apcore_a2a.adapters.errors import sanitize
from apcore_a2a.adapters.parts import value_to_python

__all__ = [
    "Answer",
    "Decision",
    "PendingApproval",
    "answer",
    "asking_message",
    "decided_metadata",
    "from_error",
    "input_required_event",
    "lost_input_event",
    "pending_approval",
    "read_decision",
    "record_decision",
]

_APPROVE_WORDS = re.compile(r"^\s*(approve|approved|yes|y|ok|allow)\b", re.IGNORECASE)
_REJECT_WORDS = re.compile(r"^\s*(reject|rejected|deny|denied|no|n|decline)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PendingApproval:
    approval_id: str
    module_id: str
    reason: str
    #: the message whose input asked for approval: an approval resumes exactly that input
    message_id: str = ""

    def as_data(self) -> dict[str, Any]:
        return {
            "approvalId": self.approval_id,
            "moduleId": self.module_id,
            "reason": self.reason,
            "code": "APPROVAL_PENDING",
            "expected": {"approved": "boolean", "reason": "string (optional)"},
        }


@dataclass(frozen=True, slots=True)
class Decision:
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """What a message on a task parked for approval leads to.

    ``event`` is the next status: ``working`` when approved (resume the module with
    ``resume_token`` as apcore's ``_approval_token``), ``input-required`` again when the
    message decided nothing, ``rejected`` when it said no.
    """

    event: TaskStatusUpdateEvent
    resume_token: str | None = None


def answer(stored: Task, message: Message, executor: Any) -> Answer | None:
    """Read *message* as the answer to *stored*'s pending approval.

    ``None`` when the task waits for no approval: the message is then fresh input.
    A decision is passed on to the executor's approval handler (``record_decision``).
    """
    pending = pending_approval(stored)
    if pending is None or stored.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return None
    task_id, context_id = stored.id, stored.context_id
    decision = read_decision(message)
    if decision is None:
        return Answer(input_required_event(task_id, context_id, pending, again=True))
    record_decision(executor, pending.approval_id, decision)
    if decision.approved:
        working = _status_event(task_id, context_id, TaskState.TASK_STATE_WORKING, [])
        working.metadata.update(decided_metadata(pending, decision))
        return Answer(working, pending.approval_id)
    reason = decision.reason or "Rejected by user"
    data = Part()
    data.data.struct_value.update(
        {"code": "APPROVAL_DENIED", "message": reason, "type": "ApprovalRejected"}
    )
    rejected = _status_event(
        task_id,
        context_id,
        TaskState.TASK_STATE_REJECTED,
        [Part(text=f"Approval rejected: {reason}"), data],
    )
    rejected.metadata.update(decided_metadata(pending, decision))
    return Answer(rejected)


def lost_input_event(stored: Task) -> TaskStatusUpdateEvent:
    """``failed``: the history no longer holds the input an approval was for."""
    return _status_event(
        stored.id,
        stored.context_id,
        TaskState.TASK_STATE_FAILED,
        [Part(text="The input this approval was for is no longer in the task history")],
    )


def from_error(exc: Any, module_id: str, message_id: str = "") -> PendingApproval:
    approval_id = getattr(exc, "approval_id", None) or uuid.uuid4().hex
    reason = getattr(exc, "reason", None) or f"Approval required to run {module_id}"
    return PendingApproval(str(approval_id), module_id, sanitize(str(reason), 300), message_id)


def asking_message(task: Task, pending: PendingApproval) -> Message | None:
    """The message of *task*'s history whose input *pending* was raised for."""
    message: Message
    for message in task.history:
        if pending.message_id and message.message_id == pending.message_id:
            return message
    # Tasks parked before the message id was recorded: their first message asked.
    if task.history and not pending.message_id:
        first: Message = task.history[0]
        return first
    return None


def pending_approval(task: Task) -> PendingApproval | None:
    """The approval a stored task is waiting for, if any."""
    if not task.HasField("metadata"):
        return None
    apcore_meta = (
        value_to_python(task.metadata.fields["apcore"])
        if ("apcore" in task.metadata.fields)
        else None
    )
    if not isinstance(apcore_meta, dict):
        return None
    entry = apcore_meta.get("approval")
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


def input_required_event(
    task_id: str, context_id: str, pending: PendingApproval, *, again: bool = False
) -> TaskStatusUpdateEvent:
    prefix = "Still waiting for approval" if again else "Approval required"
    text = (
        f"{prefix} to run {pending.module_id}: {pending.reason}. "
        'Reply with {"approved": true} to approve or {"approved": false, "reason": "..."} '
        "(or the text approve / reject) to decide. Approval id: "
        f"{pending.approval_id}."
    )
    data_part = Part()
    data_part.data.struct_value.update(pending.as_data())
    event = _status_event(
        task_id, context_id, TaskState.TASK_STATE_INPUT_REQUIRED, [Part(text=text), data_part]
    )
    event.metadata.update(_metadata(pending, "pending"))
    return event


def _status_event(
    task_id: str, context_id: str, state: TaskState, parts: list[Part]
) -> TaskStatusUpdateEvent:
    status = TaskStatus(state=state)
    if parts:
        status.message.CopyFrom(
            Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_AGENT,
                task_id=task_id,
                context_id=context_id,
                parts=parts,
            )
        )
    status.timestamp.GetCurrentTime()
    return TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)


def decided_metadata(pending: PendingApproval, decision: Decision) -> dict[str, Any]:
    """Task metadata recording how *pending* was decided (merged over the pending entry)."""
    return _metadata(pending, "approved" if decision.approved else "rejected")


def _metadata(pending: PendingApproval, status: str) -> dict[str, Any]:
    return {
        "apcore": {
            "approval": {
                "approvalId": pending.approval_id,
                "moduleId": pending.module_id,
                "reason": pending.reason,
                "messageId": pending.message_id,
                "status": status,
            }
        }
    }


def read_decision(message: Message) -> Decision | None:
    """An approve/reject answer in a follow-up message, or ``None`` if it holds none."""
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            value = value_to_python(part.data)
            if isinstance(value, dict) and isinstance(value.get("approved"), bool):
                reason = value.get("reason")
                return Decision(value["approved"], sanitize(reason, 300) if reason else None)
        elif kind == "text":
            if _APPROVE_WORDS.match(part.text):
                return Decision(True)
            if _REJECT_WORDS.match(part.text):
                rest = _REJECT_WORDS.sub("", part.text, count=1).strip(" :,-.")
                return Decision(False, sanitize(rest, 300) or None)
    return None


def record_decision(executor: Any, approval_id: str, decision: Decision) -> None:
    """Tell an approval handler that understands A2A decisions what the user said."""
    handler = getattr(executor, "_approval_handler", None)
    record = getattr(handler, "record_decision", None)
    if callable(record):
        record(approval_id, decision.approved, decision.reason)
