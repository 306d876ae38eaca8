"""Event-log positions of the events a message stream sends (its SSE ids).

``SendStreamingMessage`` / ``message/stream`` get their events from the SDK's running
task (``ActiveTask``), not from the event log that subscriptions read. To give each of
them the id it has in that log, this module uses the hook the SDK offers for the same
purpose between replicas: after saving an event (the store returns its version: the log
position with the in-process log, the task version of its event row in cluster mode),
the SDK's consumer hands that very event object, with that version, to
``TaskEventStream.publish``, in the same step in which it queues it for the streams.

:class:`PositionTap` is the stream the running tasks publish to: it forwards to the real
one (cluster mode) and notes ``(event, version)`` for each message stream that watches
the task. The stream then looks up each event it is about to send. The first event of a
new task is the Task itself, with the position of its own save, so a client that resumes
after it with ``Last-Event-ID`` gets exactly the events after it; an event that was never
saved (a direct reply Message) gets no id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion

__all__ = ["PositionTap", "StreamPositions"]

#: events a stream may lag behind the running task before its oldest notes are dropped
_MAX_NOTES = 1024


class StreamPositions:
    """The versions of the events one message stream is about to send, in order."""

    def __init__(self, tap: PositionTap) -> None:
        self.tap = tap
        self.task_id: str | None = None
        self._notes: deque[tuple[Any, TaskVersion]] = deque(maxlen=_MAX_NOTES)

    def watch(self, task_id: str) -> None:
        """Start noting the events *task_id* publishes (its id is known before they flow)."""
        self.tap.watch(task_id, self)

    def note(self, event: Any, version: TaskVersion) -> None:
        self._notes.append((event, version))

    def take(self, event: Any) -> TaskVersion | None:
        """The version *event* was published with (notes before it are dropped).

        The stream sends the published object itself, except a Task that it trims to the
        requested ``historyLength`` (a copy): then the next noted Task is the one.
        """
        index = next((i for i, (noted, _v) in enumerate(self._notes) if noted is event), None)
        if index is None:
            kind = type(event)
            index = next(
                (i for i, (noted, _v) in enumerate(self._notes) if type(noted) is kind), None
            )
        if index is None:
            return None
        for _ in range(index):
            self._notes.popleft()
        _event, version = self._notes.popleft()
        return None if version.is_missing else version


class PositionTap(TaskEventStream):
    """The ``TaskEventStream`` of running tasks: forwards, and notes for watching streams."""

    def __init__(self, inner: TaskEventStream | None) -> None:
        self._inner = inner
        self._watching: dict[str, list[StreamPositions]] = {}

    def watch(self, task_id: str, positions: StreamPositions) -> None:
        positions.task_id = task_id
        self._watching.setdefault(task_id, []).append(positions)

    def unwatch(self, positions: StreamPositions) -> None:
        task_id = positions.task_id
        watchers = self._watching.get(task_id or "", [])
        if positions in watchers:
            watchers.remove(positions)
            if not watchers:
                del self._watching[task_id or ""]

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        if self._inner is not None:
            await self._inner.publish(task_id, event)
        for positions in self._watching.get(task_id, ()):
            positions.note(event.event, event.version)

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
