"""A bounded in-process event log, for resumable subscriptions on the memory store (SQL
stores have ``task_events``; ``docs/storage.md``, *The memory store is bounded*), fed by
:class:`RecordingTaskStore`: the SDK's adapter, which drops each save's event, appending it
and reporting its log position as the task's version.

The log keeps the events of a bounded number of tasks: a new task's log takes the place of
the least recently active log of the caller holding the most (``owner_queues.py``, as the
memory task store evicts), so one caller's quick tasks replace its own logs, not the log a
parked task of another caller will be resumed from.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator

from a2a.server.cluster import LegacyTaskStoreAdapter, StoredTask, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.tasks import TaskStore
from a2a.types import Task
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.edge.call import record_of
from apcore_a2a.upstream.task_version import version_number

from ._wakeups import WakeHub
from .observed import copy_task
from .owner_queues import OwnerQueues


class MemoryEventLog:
    """The recent events of recent tasks; ``tail`` as the cluster event stream offers it."""

    def __init__(self, *, per_task: int, max_tasks: int) -> None:
        if per_task < 1 or max_tasks < 1:
            raise ValueError("task_event_log_size and task_max_capacity must be at least 1")
        self._per_task = per_task
        self._max_tasks = max_tasks
        self._logs: dict[str, deque[tuple[int, Event]]] = {}
        #: each task's caller (the one whose call logged its first event), and each
        #: caller's tasks, the least recently active first
        self._owners: dict[str, str] = {}
        self._recent = OwnerQueues()
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
            log = self._logs[task_id] = deque(maxlen=self._per_task)
            self._owners[task_id] = owner
        else:
            owner = self._owners[task_id]
        self._recent.add(owner, task_id)
        if len(log) == self._per_task:
            self._dropped[task_id] = log[0][0]
        log.append((self._last, event))
        self.hub.wake(task_id)
        return self._last

    def _forget(self, owner: str, task_id: str) -> None:
        self._recent.discard(owner, task_id)
        del self._logs[task_id], self._owners[task_id]
        self._dropped.pop(task_id, None)

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
        """Events after *after_seq*, then new ones; refuses an id whose successors are gone."""
        gone = self._dropped.get(task_id, 0) > after_seq
        if gone or (after_seq and task_id not in self._logs):
            raise InvalidParamsError(
                message=f"Last-Event-ID {after_seq}: the events after it are no longer kept "
                "(task_event_log_size); read the task with GetTask"
            )
        cursor = after_seq
        woken = self.hub.register(task_id)
        try:
            while True:
                woken.clear()
                log = self._logs.get(task_id, deque())
                fresh = [(seq, event) for seq, event in log if seq > cursor]
                for seq, event in fresh:
                    cursor = seq
                    yield seq, TaskVersion(seq), event
                if not fresh:
                    if until_idle:
                        return
                    await woken.wait()
        finally:
            self.hub.unregister(task_id, woken)


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
