"""Resumable task subscriptions: SSE event ids and ``Last-Event-ID`` replay.

Every event of a task is kept in an event log: in cluster mode the event table
(``task_events``, id = its ``seq``), otherwise the bounded in-process
``storage/event_log.py``. ``SubscribeToTask`` (1.0) and ``tasks/resubscribe`` (0.3) are
served from that log (woken at once, see ``storage/_wakeups.py``), so each SSE event
carries ``id: <position>``. A client that lost the stream sends the last id it saw
(``Last-Event-ID`` header; or ``params.metadata.lastEventId`` in JSON-RPC, or
``?lastEventId=`` on REST, for clients that cannot set headers) and gets the events
after it, then the live ones: each once, in order, also from another replica and also
when the task finished meanwhile.

Message streams (``SendStreamingMessage`` / ``message/stream``) put the same ids on their
events (``server/stream_positions.py``), so a broken one is resumed by subscription. gRPC
streams carry no ids (neither gRPC nor A2A has a place for one per message): a gRPC client
resumes as the spec says, with ``SubscribeToTask``, whose first event is the current task.

How an id reaches the wire: the request guard puts a queue into the ASGI scope
(:data:`SSE_IDS_SCOPE_KEY`); the call-context builder hands it to the handler in
``ServerCallContext.state``; the handler appends the id of each event just before it
yields the event; the guard's ``send`` wrapper writes the next id into the SSE frame
that carries that event (the SDK writes one frame per event, in order).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, MutableMapping
from typing import Any, Protocol, runtime_checkable

from a2a.server.agent_execution.active_task import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
)
from a2a.server.context import ServerCallContext
from a2a.types import Message, Task, TaskState, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from starlette.types import Message as ASGIMessage
from starlette.types import Send

from apcore_a2a.classify import request_info

__all__ = [
    "LAST_EVENT_ID_STATE_KEY",
    "SSE_IDS_SCOPE_KEY",
    "SSE_IDS_STATE_KEY",
    "EventLog",
    "last_event_id_of",
    "sse_id_send",
    "subscribe_from_log",
]

SSE_IDS_SCOPE_KEY = "apcore_a2a.sse_ids"
SSE_IDS_STATE_KEY = "apcore_a2a_sse_ids"
LAST_EVENT_ID_STATE_KEY = "apcore_a2a_last_event_id"
#: the metadata field / REST query parameter for clients that cannot set headers
LAST_EVENT_ID_FIELD = "lastEventId"


@runtime_checkable
class EventLog(Protocol):
    """What the cluster event stream offers (``storage/_wakeups.py``)."""

    async def seq_at(self, task_id: str, version: Any) -> int: ...

    def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncIterator[tuple[int, Any, Any]]: ...


def last_event_id_of(scope: MutableMapping[str, Any]) -> str | None:
    """The id a resuming client sent: header, JSON-RPC params metadata, or REST query."""
    for key, value in scope.get("headers", ()):
        if key == b"last-event-id":
            return bytes(value).decode("latin-1").strip() or None
    info = request_info(scope)
    payload = info.payload if info is not None else None
    if isinstance(payload, dict) and isinstance(payload.get("params"), dict):
        metadata = payload["params"].get("metadata")
        if isinstance(metadata, dict) and metadata.get(LAST_EVENT_ID_FIELD) is not None:
            return str(metadata[LAST_EVENT_ID_FIELD])  # a JSON scalar
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == LAST_EVENT_ID_FIELD and value:
            return value
    return None


def sse_id_send(send: Send, ids: deque[str]) -> Send:
    """Write the next queued id into each SSE event frame (comments and errors get none)."""

    async def with_ids(message: ASGIMessage) -> None:
        if message["type"] == "http.response.body" and ids:
            body = message.get("body", b"")
            if body.startswith((b"data:", b"event:")):
                message = {**message, "body": b"id: " + ids.popleft().encode() + b"\r\n" + body}
        await send(message)

    return with_ids


def _ends_stream(event: Any) -> bool:
    return isinstance(event, Message) or (
        isinstance(event, TaskStatusUpdateEvent | Task)
        and event.status.state in (TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES)
    )


def _parse_id(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 18:
        raise InvalidParamsError(
            message=f"Last-Event-ID must be an event id this agent sent, got {raw[:40]!r}"
        )
    return int(raw)


async def subscribe_from_log(
    log: EventLog, store: Any, task_id: str, context: ServerCallContext
) -> AsyncGenerator[Any, None]:
    """A subscription served from the event log, for the owner of the task in *store*.

    A resuming one reads only the task's status where the store can (``peek``), and the
    log a page at a time: a replay of a long task does not hold it in memory.
    """
    state = context.state
    raw = state.get(LAST_EVENT_ID_STATE_KEY)
    read = getattr(store, "peek", None) if raw is not None else None
    stored = await (read or store.get)(task_id, context)
    if stored is None:
        raise TaskNotFoundError
    ids: deque[str] | None = state.get(SSE_IDS_STATE_KEY)
    task: Task = stored.task
    settled = task.status.state in (TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES)
    resumed = raw is not None
    if raw is None:
        if task.status.state in TERMINAL_TASK_STATES:
            raise UnsupportedOperationError(
                message=f"Task {task_id} is in terminal state: {TaskState.Name(task.status.state)}"
            )
        cursor = await log.seq_at(task_id, stored.version)
        if ids is not None:
            ids.append(str(cursor))
        yield task
        snapshot = stored.version
    else:
        cursor, snapshot = _parse_id(raw), None
    async for seq, version, event in log.tail(task_id, cursor, until_idle=settled and resumed):
        if snapshot is not None and not version.is_after(snapshot):
            continue
        if ids is not None:
            ids.append(str(seq))
        yield event
        if _ends_stream(event):
            return
