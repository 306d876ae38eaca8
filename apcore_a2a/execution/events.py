"""Small builders for the A2A events the executor enqueues."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

__all__ = ["ARTIFACT_NAME", "agent_message", "chunk_event", "deep_merge", "status_event"]

ARTIFACT_NAME = "result"


def agent_message(task_id: str, context_id: str, text: str, data: dict[str, Any]) -> Message:
    parts = [Part(text=text)]
    if data:
        part = Part()
        part.data.struct_value.update(data)
        parts.append(part)
    return Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=parts,
    )


def status_event(
    task_id: str,
    context_id: str,
    state: TaskState,
    message: Message | None = None,
    metadata: dict[str, Any] | None = None,
) -> TaskStatusUpdateEvent:
    status = TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    if message is not None:
        status.message.CopyFrom(message)
    event = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    if metadata:
        event.metadata.update(metadata)
    return event


def chunk_event(
    task_id: str,
    context_id: str,
    artifact_id: str,
    parts: list[Part],
    *,
    append: bool,
    last: bool = False,
) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=Artifact(artifact_id=artifact_id, name=ARTIFACT_NAME, parts=parts),
        append=append,
        last_chunk=last,
    )


def deep_merge(target: dict[str, Any], chunk: Any) -> None:
    if not isinstance(chunk, dict):
        return
    for key, value in chunk.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_merge(target[key], value)
        else:
            target[key] = value
