"""Fewer writes per task in cluster mode: a blocking call's task is written once, whole.

In cluster mode every save is a versioned compare-and-swap in its own transaction, with
the event that made it appended to ``task_events`` for the other replicas: a blocking
``SendMessage`` costs four such transactions (submitted, working, the artifact,
completed) plus a claim row -- about forty database round trips, all before an answer
only the caller waits for, about a task id nobody else knows yet.

:class:`DeferredClusterWrites` keeps the states of such a task in memory, counting its
versions exactly as the store would (1, 2, 3, ...), with the event of each. The state the
call answers with (terminal, ``input-required``, ``auth-required``) is then written in one
transaction together with everything kept: the version row at the final version, the
task row, and every event row at the version it made (the tasks answering at the same
time share that transaction: :mod:`._group_commit`; on PostgreSQL it runs on a
connection of the writer's own, :mod:`._pg_writer`). The database ends up holding the
same rows, at the same versions, as if each save had been its own transaction, so other
replicas, resubscribing streams and the SDK's compare-and-swap see no difference.

What is kept, and for how long, follows :mod:`.deferred` (the same rule as without
cluster mode):

* only a new task of a blocking call without a push config (``DEFER_STATE_KEY``), whose id
  nobody outside this request holds: no other replica can read, cancel or continue it;
* a call still running after :data:`~.deferred.WRITE_DELAY` seconds is written as it
  stands then (with its claim, so restart recovery closes it out if this replica dies),
  and from then on every save goes to the store as before;
* reads of a kept task in this process are answered from memory, with its version.

A replica killed within the delay loses a task whose answer was never sent.

Every other save goes to the SDK's ``VersionedDatabaseTaskStore``, after a claim for a
running task (``_replicas.py``: a running task row always has its replica's claim).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskVersion,
    VersionedDatabaseTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel, TaskVersionModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from a2a.utils.proto_utils import to_stream_response
from sqlalchemy import Table, insert
from sqlalchemy.exc import IntegrityError

from apcore_a2a.upstream.sql_task_rows import TaskRows

from ._group_commit import GroupCommit
from ._pg_writer import PgInsert, PgWriter
from ._replicas import ReplicaRegistry
from .deferred import DEFER_STATE_KEY, WRITE_DELAY, forget_new, made_up_here
from .observed import VersionedStoreLayer

__all__ = ["DeferredClusterWrites"]

logger = logging.getLogger(__name__)

#: (version it made, serialized StreamResponse) per saved event, in order
_Events = list[tuple[int, bytes]]

_PASSING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


@dataclass(slots=True, eq=False)
class _Kept:
    task: Task
    owner: str
    #: the version the store will hold once this state is written
    version: int = 0
    events: _Events = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(slots=True, frozen=True)
class _Write:
    task_id: str
    owner: str
    row: dict[str, Any]
    version: int
    events: _Events


_Batch = list[_Write]


class DeferredClusterWrites(VersionedStoreLayer):
    """The SDK's cluster store *inner* (default tables) with the write rule of the module
    docstring; *registry* records the claims of running tasks."""

    inner: VersionedDatabaseTaskStore

    def __init__(
        self,
        inner: VersionedDatabaseTaskStore,
        registry: ReplicaRegistry,
        *,
        delay: float = WRITE_DELAY,
        pg_writer: PgWriter | None = None,
    ) -> None:
        super().__init__(inner)
        self.registry = registry
        self._delay = delay
        db = inner.as_task_store
        assert isinstance(db, DatabaseTaskStore)
        self._owner = db.owner_resolver
        self._engine = db.engine
        self._rows = TaskRows(db)
        self._versions: Table = TaskVersionModel.__table__  # type: ignore[assignment]
        self._events: Table = TaskEventModel.__table__  # type: ignore[assignment]
        self._kept: dict[str, _Kept] = {}
        self._flushes: set[asyncio.Task[None]] = set()
        self._group: GroupCommit[_Write] = GroupCommit(self._write_batch)
        #: PostgreSQL: the batches go through a connection of the writer's own
        self._pg = pg_writer
        if pg_writer is not None:
            dialect = self._engine.dialect
            self._pg_steps = tuple(
                PgInsert(table, dialect)
                for table in (self._versions, self._rows.table, self._events)
            )

    async def save(
        self,
        task: Task,
        *,
        event: Event | None = None,
        prev: Task | None = None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Keep, write with what was kept, or pass on to the store (module docstring)."""
        kept = self._kept.get(task.id)
        if kept is None and (
            made_up_here(task.id, context)
            and prev_version.is_missing
            and task.status.state in _PASSING
            and context.state.get(DEFER_STATE_KEY)
        ):
            kept = self._kept[task.id] = _Kept(task=Task(), owner=self._owner(context))
            kept.timer = asyncio.get_running_loop().call_later(
                self._delay, self._write_later, task.id
            )
        if kept is not None:
            async with kept.lock:
                # Unless the delay wrote it meanwhile: then the store holds our version.
                if self._kept.get(task.id) is kept:
                    return await self._save_kept(kept, task, event, prev_version, context)
        if task.status.state in _PASSING:
            await self.registry.claim(task.id, self._owner(context))
        else:
            self.registry.release(task.id)
        version = await self.inner.save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )
        forget_new(task.id, context)
        return version

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version; a kept one from memory, none for an id made up here."""
        kept = self._kept.get(task_id)
        if kept is not None and kept.version > 0:
            if kept.owner != self._owner(context):
                return None
            copy = Task()
            copy.CopyFrom(kept.task)
            return StoredTask(copy, TaskVersion(kept.version))
        if made_up_here(task_id, context):
            return None
        return await self.inner.get(task_id, context)

    async def peek(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """As :meth:`get`, reading only the status of a stored task (``streamed.py``)."""
        if task_id in self._kept or made_up_here(task_id, context):
            return await self.get(task_id, context)
        read = getattr(self.inner, "peek", self.inner.get)
        stored: StoredTask | None = await read(task_id, context)
        return stored

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget a kept task and delete the stored one."""
        self._forget(task_id)
        self.registry.release(task_id)
        await self.inner.delete(task_id, context)

    async def aclose(self) -> None:
        """Write every kept task as it stands (a stop without a drain) and wait for it."""
        for task_id in list(self._kept):
            self._write_later(task_id)
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)
        await self._group.aclose()
        if self._pg is not None:
            await self._pg.aclose()

    # -- internals -----------------------------------------------------------------
    async def _save_kept(
        self,
        kept: _Kept,
        task: Task,
        event: Event | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Keep *task*'s new state, or write it with everything kept (under ``kept.lock``)."""
        if prev_version != TaskVersion(kept.version):
            raise ConcurrentTaskModificationError(task.id)
        version = kept.version + 1
        events = list(kept.events)
        if event is not None:
            events.append((version, to_stream_response(event).SerializeToString()))
        copy = Task()
        copy.CopyFrom(task)
        if task.status.state in _PASSING:
            kept.task, kept.version, kept.events = copy, version, events
        else:
            # The answer: everything kept and this state, in one transaction. On failure
            # the kept state stays as it was (the delay still writes it).
            await self._write(task.id, kept.owner, copy, version, events)
            self._forget(task.id)
            self.registry.release(task.id)
        forget_new(task.id, context)
        return TaskVersion(version)

    def _forget(self, task_id: str) -> None:
        kept = self._kept.pop(task_id, None)
        if kept is not None and kept.timer is not None:
            kept.timer.cancel()

    def _write_later(self, task_id: str) -> None:
        kept = self._kept.get(task_id)
        if kept is None:
            return
        if kept.timer is not None:
            kept.timer.cancel()
            kept.timer = None
        flush = asyncio.ensure_future(self._write_running(task_id, kept))
        self._flushes.add(flush)
        flush.add_done_callback(self._flushes.discard)

    async def _write_running(self, task_id: str, kept: _Kept) -> None:
        async with kept.lock:
            if self._kept.get(task_id) is not kept or kept.version == 0:
                return
            try:
                # The claim first: a running task row always has one (see _replicas.py).
                await self.registry.claim(task_id, kept.owner)
                await self._write(task_id, kept.owner, kept.task, kept.version, kept.events)
            except Exception as exc:
                logger.warning("task %s: deferred write failed: %s", task_id, type(exc).__name__)
                kept.timer = asyncio.get_running_loop().call_later(
                    self._delay, self._write_later, task_id
                )
                return
            self._forget(task_id)

    async def _write(
        self, task_id: str, owner: str, task: Task, version: int, events: _Events
    ) -> None:
        row = self._rows.row(task, owner)
        try:
            await self._group.submit(_Write(task_id, owner, row, version, events))
        except IntegrityError:
            # Its id is taken (the SDK store's "first writer wins" signal, as there).
            raise ConcurrentTaskModificationError(task_id) from None

    async def _write_batch(self, batch: _Batch) -> None:
        await self.inner.initialize()  # once: the SDK's tables exist from then on
        events = [
            {"task_id": w.task_id, "owner": w.owner, "task_version": v, "event_data": data}
            for w in batch
            for v, data in w.events
        ]
        versions = [{"task_id": w.task_id, "owner": w.owner, "version": w.version} for w in batch]
        tasks = [w.row for w in batch]
        # One statement on PostgreSQL: its parts insert fresh ids, so no lock order to
        # keep; through the engine, version rows before task rows (the SDK store's order).
        if self._pg is not None:
            v, t, e = self._pg_steps
            await self._pg.write([(v, versions), (t, tasks), (e, events)])
            return
        async with self._engine.begin() as conn:
            await conn.execute(insert(self._versions), versions)
            await conn.execute(insert(self._rows.table), tasks)
            if events:
                await conn.execute(insert(self._events), events)
