"""Delivery bodies shaped by the protocol version a push config was registered under.

* 1.0: the ``StreamResponse`` of the event, exactly as a 1.0 SSE stream carries it:
  ``{"task": ...}``, ``{"statusUpdate": ...}`` or ``{"artifactUpdate": ...}``;
* 0.3: the whole ``Task`` as 0.3 JSON (``{"kind": "task", "id": ..., "status": ...}``), as
  0.3 senders (the a2a-sdk 0.3 ``BasePushNotificationSender``) post it on every update.

The version of a call is read from the call context: a transport that knows it (the gRPC
services) marks it under :data:`PROTOCOL_VERSION_STATE_KEY`; otherwise it is the
``A2A-Version`` header, where a missing header means 0.3, the rule the SDK's version
check applies to the same request.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_task
from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types import Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from apcore_a2a.storage.streamed import IN_LOG

__all__ = [
    "PROTOCOL_VERSION_STATE_KEY",
    "V0_3",
    "V1_0",
    "body_v03",
    "body_v10",
    "protocol_version",
]

V1_0 = "1.0"
V0_3 = "0.3"
#: ``ServerCallContext.state`` key where a transport records the protocol version it serves.
PROTOCOL_VERSION_STATE_KEY = "apcore_a2a.protocol_version"


def protocol_version(context: ServerCallContext | None) -> str:
    """``"1.0"`` or ``"0.3"``: the protocol version of the call that built *context*."""
    if context is None:
        return V1_0
    marked = context.state.get(PROTOCOL_VERSION_STATE_KEY)
    if marked in (V1_0, V0_3):
        return str(marked)
    headers = context.state.get("headers")
    raw: Any = None
    if isinstance(headers, dict):
        raw = headers.get("a2a-version") or headers.get("A2A-Version")
    if not raw:
        return V0_3
    return V0_3 if str(raw).strip().split(".", 1)[0] == "0" else V1_0


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def body_v10(event: PushNotificationEvent) -> bytes:
    """The 1.0 ``StreamResponse`` JSON of *event*."""
    return _dumps(MessageToDict(to_stream_response(event)))


def body_v03(event: PushNotificationEvent, task: Task | None) -> bytes:
    """The 0.3 ``Task`` JSON after *event*.

    *task* is the task as stored right after the event (see
    :class:`~apcore_a2a.push.snapshots.TaskSnapshots`). Without it, the task is rebuilt
    from the event alone (id, context, status or the one artifact), so a 0.3 receiver
    still gets a ``Task`` it can read.
    """
    if isinstance(event, Task):
        current = event
    elif task is not None:
        current = _unmarked(task, event)
    else:
        current = Task(id=event.task_id, context_id=event.context_id)
        if isinstance(event, TaskStatusUpdateEvent):
            current.status.CopyFrom(event.status)
        elif isinstance(event, TaskArtifactUpdateEvent):
            current.artifacts.append(event.artifact)
    compat = to_compat_task(current)
    return _dumps(compat.model_dump(mode="json", exclude_none=True, by_alias=True))


def _unmarked(task: Task, event: PushNotificationEvent) -> Task:
    """*task* without the marks of chunks kept in the event log (``storage/streamed.py``).

    While a stream runs in cluster mode, the task in memory holds its streamed artifact
    empty and marked; a 0.3 body then carries the chunk of this event in its place (the
    earlier chunks were delivered with their own events), never the mark.
    """
    if not any(IN_LOG in a.metadata for a in task.artifacts):
        return task
    copy = Task()
    copy.CopyFrom(task)
    del copy.artifacts[:]
    for artifact in task.artifacts:
        if IN_LOG not in artifact.metadata:
            copy.artifacts.append(artifact)
        elif (
            isinstance(event, TaskArtifactUpdateEvent)
            and event.artifact.artifact_id == artifact.artifact_id
        ):
            copy.artifacts.append(event.artifact)
    return copy
