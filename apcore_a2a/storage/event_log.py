"""A bounded in-process event log, for resumable subscriptions on the memory store (SQL
stores have ``task_events``; ``docs/storage.md``, *The memory store is bounded*), fed by
:class:`RecordingTaskStore`: the SDK's adapter, which drops each save's event, appending it
and reporting its log position as the task's version.

Each task's log holds at most ``per_task`` events and ``per_task_bytes`` bytes of them (their
protobuf size; its latest event is kept whatever its size). A follow-up logs the whole task,
history and all: that event replaces the task's earlier ones, so the log holds one copy of
its history, not one per turn.
The log keeps the events of a bounded number of tasks: a new task's log takes the place of
the least recently active log of the caller holding the most (``memory.py``, as the
memory task store evicts), so one caller's quick tasks replace its own logs, not the log a
parked task of another caller will be resumed from. All the logs together hold at most
``total_bytes``: past it, finished tasks' logs go first, the earliest finished first, then
the least recently active live log of the caller holding the most bytes (a reader of a log
that went is told, as one the bounds left behind).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import AsyncGenerator

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.cluster import LegacyTaskStoreAdapter, StoredTask, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.tasks import TaskStore
from a2a.types import Task, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.edge.call import record_of
from apcore_a2a.upstream.sql_task_rows import version_number

from ._wakeups import WakeHub
from .memory import OwnerQueues
from .observed import copy_task


class MemoryEventLog:
    """The recent events of recent tasks; ``tail`` as the cluster event stream offers it."""

    def __init__(
        self, *, per_task: int, max_tasks: int, per_task_bytes: int, total_bytes: int = 1 << 62
    ) -> None:
        if min(per_task, max_tasks, per_task_bytes, total_bytes) < 1:
            raise ValueError("task_event_log_size and the *_bytes bounds must be at least 1")
        self._per_task = per_task
        self._max_tasks = max_tasks
        self._per_task_bytes = per_task_bytes
        self.total_bytes = total_bytes
        """The bytes all the logs may hold together (``task_event_log_total_bytes``)."""
        #: the finished tasks' logs, the earliest finished first
        self._finished: dict[str, None] = {}
        #: per task, its events (id, event, size), and the bytes they hold
        self._logs: dict[str, deque[tuple[int, Event, int]]] = {}
        self._bytes: dict[str, int] = {}
        self.held_bytes = 0
        """The bytes of all the events kept (their protobuf sizes)."""
        #: each task's caller (the one whose call logged its first event), and each
        #: caller's tasks, the least recently active first
        self._owners: dict[str, str] = {}
        self._recent = OwnerQueues()
        #: per caller, the bytes its logs hold (``total_bytes`` takes from the largest)
        self._owner_bytes: dict[str, int] = {}
        #: per task, the id of the latest event that fell out of its log
        self._dropped: dict[str, int] = {}
        self._last = 0
        self.hub = WakeHub()

    def append(self, task_id: str, event: Event, *, owner: str) -> int:
        """Log *event* of the task, filing a new task's log under *owner*; its id."""
        self._last += 1
        log = self._logs.get(task_id)
        if log is None:
            while len(self._logs) >= self._max_tasks and (oldest := self._recent.next_out()):
                self._forget(*oldest)
            log = self._logs[task_id] = deque()
            self._owners[task_id] = owner
            self._bytes[task_id] = 0
            self._owner_bytes.setdefault(owner, 0)
            if not isinstance(event, Task):
                # A log that went and comes back lacks the events before this one (a task
                # starts with a Task, which replaces them): a resume from them is refused.
                self._dropped[task_id] = self._last - 1
        else:
            owner = self._owners[task_id]
        self._recent.add(owner, task_id)
        size = _size_of(event)
        held = before = self._bytes[task_id]
        if isinstance(event, Task):
            # The whole task supersedes its earlier events: a reader resuming before it
            # is given it, then what follows (docs/storage.md, *What a long conversation
            # writes*), so they go, and no id before it is refused for their sake.
            self.held_bytes -= held
            held = 0
            log.clear()
            self._dropped.pop(task_id, None)
        log.append((self._last, event, size))
        held += size
        self.held_bytes += size
        while len(log) > self._per_task or (held > self._per_task_bytes and len(log) > 1):
            self._dropped[task_id], _event, dropped = log.popleft()
            held -= dropped
            self.held_bytes -= dropped
        self._bytes[task_id] = held
        self._owner_bytes[owner] += held - before
        if _ends_task(event):
            self._finished[task_id] = None
        while self.held_bytes > self.total_bytes and (out := self._next_out(task_id)):
            self._forget(*out)
        self.hub.wake(task_id)
        return self._last

    def _next_out(self, keep: str) -> tuple[str, str] | None:
        """The log to drop past ``total_bytes``: the earliest finished task's, else the least
        recently active one of the caller whose logs hold the most bytes (a caller with a
        few large logs gave up another's many small live ones when the count decided);
        never *keep*'s (the log just appended)."""
        finished = next((t for t in self._finished if t != keep), None)
        if finished is not None:
            return self._owners[finished], finished
        # The heaviest caller, or the next one if the heaviest holds only *keep*.
        for owner in heapq.nlargest(2, self._owner_bytes, key=self._owner_bytes.__getitem__):
            task_id = self._recent.oldest(owner, skip=keep)
            if task_id is not None:
                return owner, task_id
        return None

    def _forget(self, owner: str, task_id: str) -> None:
        self._recent.discard(owner, task_id)
        del self._logs[task_id], self._owners[task_id]
        held = self._bytes.pop(task_id)
        self.held_bytes -= held
        self._owner_bytes[owner] -= held
        if not self._recent.holds(owner):
            del self._owner_bytes[owner]
        self._dropped.pop(task_id, None)
        self._finished.pop(task_id, None)
        self.hub.wake(task_id)  # its readers: told now, not at the task's next event

    def position(self, task_id: str) -> int:
        """The id of the task's latest event (0 if none is kept)."""
        log = self._logs.get(task_id)
        return log[-1][0] if log else 0

    async def head(self, task_id: str) -> int:
        """The id of the task's latest event; for a task whose events are no longer kept,
        the latest id sent at all (ids after it were never sent)."""
        return self.position(task_id) or self._last

    async def seq_at(self, task_id: str, version: TaskVersion) -> int:
        try:
            return version_number(version)
        except TypeError:  # not a versioned store's number
            return 0

    async def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncGenerator[tuple[int, TaskVersion, Event], None]:
        """Events after *after_seq*, then new ones; refuses an id whose successors are gone,
        also once streaming: a reader that fell behind the bounds gets no gap."""
        cursor = after_seq
        woken = self.hub.register(task_id)
        try:
            while True:
                woken.clear()
                log = self._logs.get(task_id)
                gone = self._dropped.get(task_id, 0) > cursor
                if gone or (cursor and log is None):
                    raise InvalidParamsError(
                        message=f"Last-Event-ID {cursor}: the events after it are no longer "
                        "kept (task_event_log_size, task_event_log_bytes, "
                        "task_event_log_total_bytes); read the task with GetTask"
                    )
                fresh = [(seq, event) for seq, event, _size in log or () if seq > cursor]
                for seq, event in fresh:
                    cursor = seq
                    yield seq, TaskVersion(seq), event
                if not fresh:
                    if until_idle:
                        return
                    await woken.wait()
        finally:
            self.hub.unregister(task_id, woken)


def _ends_task(event: Event) -> bool:
    if isinstance(event, Task | TaskStatusUpdateEvent):
        return event.status.state in TERMINAL_TASK_STATES
    return False


def _size_of(event: Event) -> int:
    """The protobuf size of *event*; a whole task's summed over its messages and artifacts
    (as ``execution/routing.py`` sizes a history): one ``ByteSize`` of a 1 MB task took
    2 ms, its parts' 0.2 ms (``python -m benchmarks.event_log``)."""
    if isinstance(event, Task):
        parts = (event.status, *event.history, *event.artifacts)
        return int(sum(part.ByteSize() for part in parts) + event.metadata.ByteSize())
    return int(event.ByteSize())


class RecordingTaskStore(LegacyTaskStoreAdapter):
    """The SDK's adapter for an unversioned store, appending each saved event to a log."""

    def __init__(self, store: TaskStore, log: MemoryEventLog) -> None:
        super().__init__(store)
        self.log = log

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        await super().save(task, event=event, prev=prev, prev_version=prev_version, context=context)
        if event is None:
            return TaskVersion.MISSING
        if isinstance(event, Task):
            # The SDK goes on changing the Task it enqueued (it is the task it keeps): the
            # log keeps the event as it was sent.
            event = copy_task(event)
        return TaskVersion(self.log.append(task.id, event, owner=record_of(context).caller))

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        # The position is read first: the snapshot may then hold a later event too (sent
        # again after it), but never misses one that the position claims.
        position = self.log.position(task_id)
        stored = await super().get(task_id, context)
        if stored is None:
            return None
        return StoredTask(stored.task, TaskVersion(position) if position else stored.version)
