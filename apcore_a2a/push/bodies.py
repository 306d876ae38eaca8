"""Delivery bodies shaped by the protocol version a push config was registered under.

1.0: the event's ``StreamResponse``, exactly as a 1.0 SSE stream carries it. 0.3: the
whole ``Task`` as 0.3 JSON, as 0.3 senders post it on every update. The SDK saves the
updated task and then, in the same coroutine, calls the sender with only the event, so
the sender's ``snapshots`` (the latest save per task, noted by a save listener of the task
store, ``PushKit.saved``) give the task after the event with no read and no owner. Their
bound covers saves no event follows (a cancel from another replica, recovery of
interrupted tasks).
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

from apcore_a2a.edge.call import call_of
from apcore_a2a.storage.streamed import in_log

V1_0 = "1.0"
V0_3 = "0.3"


def protocol_version(context: ServerCallContext | None) -> str:
    """``"1.0"`` or ``"0.3"``: the version of the call that built *context*, as its call
    record says (every binding has one; a call the edge did not see speaks 1.0)."""
    call = call_of(context)
    return call.version if call is not None and call.version == V0_3 else V1_0


def dumps(doc: Any) -> bytes:
    """Compact UTF-8 JSON, the bytes a delivery or a rewritten answer carries."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def body_v10(event: PushNotificationEvent) -> bytes:
    """The 1.0 ``StreamResponse`` JSON of *event*."""
    return dumps(MessageToDict(to_stream_response(event)))


def body_v03(event: PushNotificationEvent, task: Task | None) -> bytes:
    """The 0.3 ``Task`` JSON after *event*: *task* as saved right after it, else a task
    rebuilt from the event alone, so a 0.3 receiver still gets a ``Task`` it can read."""
    if isinstance(event, Task):
        current = event
    elif task is not None:
        current = _chunk_in_place(task, event)
    else:
        current = Task(id=event.task_id, context_id=event.context_id)
        if isinstance(event, TaskStatusUpdateEvent):
            current.status.CopyFrom(event.status)
        elif isinstance(event, TaskArtifactUpdateEvent):
            current.artifacts.append(event.artifact)
    return dumps(to_compat_task(current).model_dump(mode="json", exclude_none=True, by_alias=True))


def _chunk_in_place(task: Task, event: PushNotificationEvent) -> Task:
    """*task* with this event's chunk in place of a streamed artifact a SQL store keeps in
    the event log (``storage/streamed.py``); earlier chunks went with their own events."""
    if not any(in_log(a) for a in task.artifacts):
        return task
    chunk = event.artifact if isinstance(event, TaskArtifactUpdateEvent) else None
    copy = Task()
    copy.CopyFrom(task)
    del copy.artifacts[:]
    for artifact in task.artifacts:
        if not in_log(artifact):
            copy.artifacts.append(artifact)
        elif chunk is not None and chunk.artifact_id == artifact.artifact_id:
            copy.artifacts.append(chunk)
    return copy
