"""Resumable streams: SSE event ids and ``Last-Event-ID`` replay.

Every event of a task is kept in an event log (cluster: the ``task_events`` table, id =
its ``seq``; otherwise the bounded in-process ``storage/event_log.py``), so each SSE event
carries ``id: <position>``; a client that lost the stream sends the last id it saw
(``Last-Event-ID``, or ``lastEventId`` in JSON-RPC params metadata or the REST query) and
gets each later event once, in order, from any replica. gRPC streams carry no ids (neither
gRPC nor A2A has a place for one): their clients resubscribe for the current task.

The handler notes each event's id on the call's answer (``streams/tap.py``) just before
yielding it; the answer side writes it into that event's SSE frame (the SDK writes one
frame per event and asks for the next only once it is sent). Message streams get their
events from the SDK's running task, not the log: :class:`PositionTap` is the
``TaskEventStream`` the SDK publishes each saved event to, with its version; an event never
saved (a direct reply Message) gets no id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, MutableMapping
from typing import Any, Protocol, runtime_checkable

from a2a.server.agent_execution.active_task import (
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
)
from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import Message, Task, TaskState, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from starlette.datastructures import Headers, QueryParams

from apcore_a2a.classify import request_info
from apcore_a2a.streams.tap import answer_of

#: the metadata field / REST query parameter for clients that cannot set headers
LAST_EVENT_ID_FIELD = "lastEventId"
#: ends the id of a subscription's first event, the task as it stands: the position of the
#: latest event it shows, which names that event (one id, one event); a resume from either
#: gets what came after it
_SNAPSHOT_MARK = "s"
#: events a message stream may lag behind the running task before its oldest notes go
_MAX_NOTES = 1024


@runtime_checkable
class EventLog(Protocol):
    """What the cluster event stream offers (``storage/_wakeups.py``)."""

    async def seq_at(self, task_id: str, version: Any) -> int: ...

    async def head(self, task_id: str) -> int: ...

    def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncIterator[tuple[int, Any, Any]]: ...


def last_event_id_of(scope: MutableMapping[str, Any]) -> str | None:
    """The id a resuming client sent: header, JSON-RPC params metadata, or REST query."""
    header = Headers(scope=scope).get("last-event-id")
    if header is not None:
        return header.strip() or None
    info = request_info(scope)
    payload = info.payload if info is not None and info.binding == "jsonrpc" else None
    if isinstance(payload, dict) and isinstance(payload.get("params"), dict):
        metadata = payload["params"].get("metadata")
        if isinstance(metadata, dict) and metadata.get(LAST_EVENT_ID_FIELD) is not None:
            return str(metadata[LAST_EVENT_ID_FIELD])  # a JSON scalar
    return QueryParams(scope.get("query_string", b"")).get(LAST_EVENT_ID_FIELD) or None


def _ends_stream(event: Any) -> bool:
    """Whether a logged *event* is its stream's last. A task parks by a status update; a
    ``Task`` in an interrupted state is the parked task saved again, with the message
    that continues it in its history (the run it starts follows), so it ends nothing."""
    if isinstance(event, Message):
        return True
    if isinstance(event, Task):
        return event.status.state in TERMINAL_TASK_STATES
    return isinstance(event, TaskStatusUpdateEvent) and event.status.state in (
        TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
    )


def _parse_id(raw: str) -> int:
    digits = raw.removesuffix(_SNAPSHOT_MARK)
    # ASCII only: ``isdigit`` also says yes to "²" (which ``int`` refuses) and "٣"
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise InvalidParamsError(
            message=f"Last-Event-ID must be an event id this agent sent, got {raw[:40]!r}"
        )
    return int(digits)


async def subscribe_from_log(
    log: EventLog, store: Any, task_id: str, context: ServerCallContext
) -> AsyncGenerator[tuple[Any, str], None]:
    """A subscription served from the event log, for the owner of the task in *store*:
    the task as it is unless resumed, then each event, each with its SSE id; a resumed
    one reads the log a page at a time and the task's status only (``peek``)."""
    answer = answer_of(context)
    raw = answer.last_event_id if answer is not None else None
    read = getattr(store, "peek", None) if raw is not None else None
    stored = await (read or store.get)(task_id, context)
    if stored is None:
        raise TaskNotFoundError
    task: Task = stored.task
    settled = task.status.state in (TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES)
    resumed = raw is not None
    if raw is None:
        if task.status.state in TERMINAL_TASK_STATES:
            raise UnsupportedOperationError(
                message=f"Task {task_id} is in terminal state: {TaskState.Name(task.status.state)}"
            )
        cursor = await log.seq_at(task_id, stored.version)
        yield task, f"{cursor}{_SNAPSHOT_MARK}"
        snapshot = stored.version
    else:
        cursor, snapshot = _parse_id(raw), None
        head = await log.head(task_id)
        if cursor > head:  # never sent for this task: no event would ever follow it
            raise InvalidParamsError(
                message=f"Last-Event-ID {cursor} is past the latest event of task {task_id} "
                f"({head}); subscribe without it, or read the task with GetTask"
            )
    async for seq, version, event in log.tail(task_id, cursor, until_idle=settled and resumed):
        if snapshot is not None and not version.is_after(snapshot):
            continue
        yield event, str(seq)
        if _ends_stream(event):
            return


class StreamPositions:
    """The versions of the events one message stream is about to send, in order."""

    def __init__(self, tap: PositionTap) -> None:
        self.tap = tap
        self.task_id: str | None = None
        #: ``(event, version)`` as the tap saw them published, oldest first
        self.notes: deque[tuple[Any, TaskVersion]] = deque(maxlen=_MAX_NOTES)

    def watch(self, task_id: str) -> None:
        """Start noting the events *task_id* publishes (its id is known before they flow)."""
        self.task_id = task_id
        self.tap.watching.setdefault(task_id, []).append(self)

    def take(self, event: Any) -> TaskVersion | None:
        """The version *event* was published with (notes before it are dropped); a Task the
        stream trimmed to ``historyLength`` is a copy: then the next noted Task is the one.

        A terminal ``Task`` gets none. Our runs report their end by a status update; a
        stream ends with the whole task when another writer ended it (a cancel on another
        replica): the SDK rereads the task and publishes it with that writer's version,
        whose log entry is the writer's status update. One id names one event, so the
        task, the stream's last event, goes without one (nothing follows it to resume)."""
        if isinstance(event, Task) and event.status.state in TERMINAL_TASK_STATES:
            return None
        notes = self.notes
        index = next((i for i, (noted, _v) in enumerate(notes) if noted is event), None)
        if index is None:
            kind = type(event)
            index = next((i for i, (noted, _v) in enumerate(notes) if type(noted) is kind), None)
        if index is None:
            return None
        for _ in range(index):
            notes.popleft()
        _event, version = notes.popleft()
        return None if version.is_missing else version


class PositionTap(TaskEventStream):
    """The ``TaskEventStream`` of running tasks: forwards, and notes for watching streams."""

    def __init__(self, inner: TaskEventStream | None) -> None:
        self._inner = inner
        #: the message streams watching each task
        self.watching: dict[str, list[StreamPositions]] = {}

    def unwatch(self, positions: StreamPositions) -> None:
        """Stop noting for *positions* (its stream ended)."""
        task_id = positions.task_id or ""
        watchers = self.watching.get(task_id, [])
        if positions in watchers:
            watchers.remove(positions)
            if not watchers:
                del self.watching[task_id]

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        if self._inner is not None:
            await self._inner.publish(task_id, event)
        for positions in self.watching.get(task_id, ()):
            positions.notes.append((event.event, event.version))

    def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        # Required by the interface, reached only in cluster mode: the SDK subscribes
        # through the handler's own event stream, never through the running tasks' one
        # this tap replaces, and that stream stays None without cluster mode.
        if self._inner is None:
            raise NotImplementedError("no cross-replica stream without cluster mode")
        return self._inner.subscribe(task_id, after=after)

    async def destroy(self, task_id: str) -> None:
        if self._inner is not None:
            await self._inner.destroy(task_id)
