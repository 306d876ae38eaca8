"""Fewer writes per task: what a blocking call passes through waits in memory.

The SDK stores a blocking ``SendMessage`` four times and looks up three times an id it
made up, though the caller only ever sees the last state (the rule and its promises:
``docs/storage.md``, *How tasks are written*). A kept task carries the versions and
events a save per event would have made, so other replicas, resubscribing streams and
the SDK's compare-and-swap see no difference.
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
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel, TaskVersionModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from a2a.utils.proto_utils import to_stream_response
from sqlalchemy import Table, insert
from sqlalchemy.exc import IntegrityError

from apcore_a2a.edge.call import CallRecord, call_of
from apcore_a2a.upstream.sql_task_rows import TaskRows

from ._pg_writer import PgInsert, PgWriter
from ._replicas import ReplicaRegistry
from .observed import Layer, copy_task
from .outages import is_outage
from .streamed import GroupCommit

logger = logging.getLogger(__name__)

#: Seconds a blocking call's passing state may wait in memory before it is written.
WRITE_DELAY = 1.0
#: Times a kept state is tried while the database is unreachable (one try per delay).
MAX_TRIES = 30

_PASSING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


def _made_up_here(task_id: str, context: ServerCallContext) -> CallRecord | None:
    """The call record if *task_id* is the id this call made up (nothing stored yet)."""
    call = call_of(context)
    return call if call is not None and call.new_task == task_id else None


def _forget_new(task_id: str, context: ServerCallContext) -> None:
    """After the first save of a made-up id, the store answers for it."""
    if call := _made_up_here(task_id, context):
        call.new_task = None


@dataclass(slots=True, eq=False)
class _Kept:
    task: Task
    owner: str
    timer: asyncio.TimerHandle | None = None
    #: the version the store will hold once this state is written
    version: int = 0
    tries: int = 0
    #: (version it made, serialized StreamResponse) per saved event, in order
    events: list[tuple[int, bytes]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


#: one cluster write: its ``task_versions`` row, ``tasks`` row and ``task_events`` rows
_Write = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]


class DeferredWrites(Layer, VersionedTaskStore):
    """The SDK's versioned store *inner* (default tables) with the write rule of the module
    docstring; *registry* records the claims of running tasks (cluster mode; ``None``:
    one process)."""

    inner: VersionedDatabaseTaskStore

    def __init__(
        self,
        inner: VersionedDatabaseTaskStore,
        registry: ReplicaRegistry | None,
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
        kept = self._kept.get(task.id)
        call = _made_up_here(task.id, context)
        # A new task of a call that answers only when it settles (``defer_writes``).
        passing = task.status.state in _PASSING
        if kept is None and call and call.defer_writes and prev_version.is_missing and passing:
            kept = self._kept[task.id] = _Kept(task=Task(), owner=self._owner(context))
            self._arm(kept, task.id)
        if kept is not None:
            async with kept.lock:
                # Unless the delay wrote it meanwhile: then the store holds our version.
                if self._kept.get(task.id) is kept:
                    return await self._save_kept(kept, task, event, prev_version, context)
        if passing:
            await self._claim(task.id, self._owner(context))
        else:
            self._release(task.id)
        version = await self.inner.save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )
        _forget_new(task.id, context)
        return version

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        kept = self._kept.get(task_id)
        if kept is not None and kept.version > 0:
            if kept.owner != self._owner(context):
                return None
            return StoredTask(copy_task(kept.task), TaskVersion(kept.version))
        if _made_up_here(task_id, context):
            return None
        return await self.inner.get(task_id, context)

    async def peek(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """As :meth:`get`, reading only the status of a stored task (``streamed.py``)."""
        if task_id in self._kept or _made_up_here(task_id, context):
            return await self.get(task_id, context)
        stored: StoredTask | None = await super().peek(task_id, context)
        return stored

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._forget(task_id)
        self._release(task_id)
        await self.inner.delete(task_id, context)

    async def aclose(self) -> None:
        """Write every kept task as it stands (a stop without a drain) and wait for it."""
        for task_id in list(self._kept):
            self._write_later(task_id)
        await asyncio.gather(*self._flushes, return_exceptions=True)
        await self._group.aclose()
        if self._pg is not None:
            await self._pg.aclose()

    async def _save_kept(
        self,
        kept: _Kept,
        task: Task,
        event: Event | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        if prev_version != TaskVersion(kept.version):
            raise ConcurrentTaskModificationError(task.id)
        version = kept.version + 1
        events = list(kept.events)
        if event is not None:
            events.append((version, to_stream_response(event).SerializeToString()))
        if task.status.state in _PASSING:
            kept.task, kept.version, kept.events = copy_task(task), version, events
        else:
            # The answer: everything kept and this state, in one transaction. On failure
            # the kept state stays as it was (the delay still writes it).
            await self._write(task.id, kept.owner, copy_task(task), version, events)
            self._forget(task.id)
            self._release(task.id)
        _forget_new(task.id, context)
        return TaskVersion(version)

    def _arm(self, kept: _Kept, task_id: str) -> None:
        kept.timer = asyncio.get_running_loop().call_later(self._delay, self._write_later, task_id)

    def _forget(self, task_id: str) -> None:
        found = self._kept.pop(task_id, None)
        if found is not None and found.timer is not None:
            found.timer.cancel()

    async def _claim(self, task_id: str, owner: str) -> None:
        if self.registry is not None:
            await self.registry.claim(task_id, owner)

    def _release(self, task_id: str) -> None:
        if self.registry is not None:
            self.registry.release(task_id)

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
                await self._claim(task_id, kept.owner)
                await self._write(task_id, kept.owner, kept.task, kept.version, kept.events)
            except Exception as exc:
                # Tried again during an outage (at most MAX_TRIES times), never for a
                # value the store refuses.
                kept.tries += 1
                again = is_outage(exc) and kept.tries < MAX_TRIES
                why = "will try again" if again else "given up"
                name = type(exc).__name__
                logger.warning("task %s: deferred write failed (%s); %s", task_id, name, why)
                if again:
                    self._arm(kept, task_id)
                    return
            # Written, or never will be: the task's next save goes to the store (and its
            # caller gets the error then).
            self._forget(task_id)

    async def _write(
        self, task_id: str, owner: str, task: Task, version: int, events: list[tuple[int, bytes]]
    ) -> None:
        ids = {"task_id": task_id, "owner": owner}
        rows = [{**ids, "task_version": v, "event_data": data} for v, data in events]
        write = ({**ids, "version": version}, self._rows.row(task, owner), rows)
        try:
            await self._group.submit(write)
        except IntegrityError:
            # Its id is taken (the SDK store's "first writer wins" signal, as there).
            raise ConcurrentTaskModificationError(task_id) from None

    async def _write_batch(self, batch: list[_Write]) -> None:
        await self.inner.initialize()  # once: the SDK's tables exist from then on
        versions = [version for version, _, _ in batch]
        tasks = [task for _, task, _ in batch]
        events = [event for _, _, rows in batch for event in rows]
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
