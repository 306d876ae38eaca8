"""Streamed chunks stay out of the task row while the task runs (every SQL store).

The SDK stores the whole task with each appended chunk (a stream of *n* chunks rewrites
the artifact *n* times), and every event in ``task_events`` too. So an appended artifact
of a running task is emptied in the very task object the SDK keeps in memory; its parts
are put back from the events on a read and on the save that settles the task
(``docs/storage.md``, *Long streams*; 0.3 push bodies put the event's chunk in its place:
``push/bodies.py``). No mark is kept in the row: an artifact has at least one part (its
``parts`` are REQUIRED), so a stored one without any is one whose parts are its events
(:func:`in_log`).

A save of a task already stored is the SDK's compare-and-swap in Core statements, its
event inserted ``RETURNING seq`` (noted in :attr:`ChunkedTaskStore.seqs`: the stream
names its SSE id without a read); a cancel, which the SDK orders against the task's
state, is too, so that it changes only the state of a task saved since it was read.
Concurrent tasks' saves share a transaction (:class:`GroupCommit`) taken in task id order,
so two replicas' batches lock in one order (``docs/storage.md``, *What a streamed event
costs*).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
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
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
)
from a2a.types.a2a_pb2 import StreamResponse
from a2a.utils.proto_utils import to_stream_response
from cachetools import LRUCache
from google.protobuf.json_format import ParseDict
from sqlalchemy import Table, and_, delete, insert, select, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.upstream.sql_task_rows import TaskRows, version_number
from apcore_a2a.upstream.unreadable_rows import read_rows_safely

from .event_index import of_task
from .listing import TaskPages
from .outages import is_outage

_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
#: the stored spelling of a finished task's state (``status.state`` of a 1.0 row)
_FINISHED = frozenset(TaskState.Name(state) for state in TERMINAL_TASK_STATES)
#: Event ids noted for streams to name (each is taken once, right after its save).
NOTED_SEQS = 10_000
#: As the SDK's store: tries of a save that met lock contention, and the pause per try.
_TRIES, _PAUSE_S = 5, 0.02
#: PostgreSQL deadlock and serialization failure (asyncpg reports them as DBAPIError).
_CONTENTION = frozenset({"40P01", "40001"})
_E: Table = TaskEventModel.__table__  # type: ignore[assignment]
_V: Table = TaskVersionModel.__table__  # type: ignore[assignment]
#: one save of a stored task: its id, owner, new version, row, event (``None``: none), and
#: whether the event is the whole task, which supersedes the task's earlier events
_Save = tuple[str, str, int, dict[str, Any], bytes | None, bool]
_T = TypeVar("_T")


class ChunkedTaskStore(VersionedDatabaseTaskStore):
    """``VersionedDatabaseTaskStore`` keeping appended chunks in the event log only."""

    def __init__(self, engine: AsyncEngine) -> None:
        # A row that holds no readable task is a typed error on every read of it.
        super().__init__(engine)
        read_rows_safely(self._sql)
        self._rows = TaskRows(self._sql)
        #: (task id, version) -> ``task_events.seq`` of the event that save inserted
        self.seqs: LRUCache[tuple[str, int], int] = LRUCache(NOTED_SEQS)
        self._group: GroupCommit[_Save] = GroupCommit(self._write_saves)
        self._pages = TaskPages(self._sql)

    async def aclose(self) -> None:
        """Wait for the saves under way."""
        await self._group.aclose()

    @property
    def _sql(self) -> DatabaseTaskStore:
        return cast("DatabaseTaskStore", self.as_task_store)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None = None,
        prev: Task | None = None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Store *task*: appended chunks of a running task go to ``task_events`` only."""
        if task.status.state in _RUNNING:
            if isinstance(event, TaskArtifactUpdateEvent) and event.append:
                _take_out(task, event)
        elif any(in_log(a) for a in task.artifacts):
            await self._put_back(task, self._sql.owner_resolver(context), None)
        await self.initialize()  # once: the tables exist from then on
        owner = self._sql.owner_resolver(context)
        data = None if event is None else to_stream_response(event).SerializeToString()
        if task.status.state == TaskState.TASK_STATE_CANCELED and not prev_version.is_missing:
            read = version_number(prev_version)
            with contextlib.suppress(_OlderRow):
                return await _retried(lambda: self._cancel(task, owner, read, data))
        if prev_version.is_missing or task.status.state == TaskState.TASK_STATE_CANCELED:
            return await super().save(
                task, event=event, prev=prev, prev_version=prev_version, context=context
            )
        version = version_number(prev_version) + 1
        row = self._rows.row(task, owner)
        whole = isinstance(event, Task) and not any(in_log(a) for a in event.artifacts)
        save = (task.id, owner, version, row, data, whole)
        seq = await _retried(lambda: self._group.submit(save))
        if seq is not None:
            self.seqs[task.id, version] = seq
        return TaskVersion(version)

    async def _write_saves(self, batch: list[_Save]) -> list[Any]:
        """The SDK's update of each save, in one transaction: per task the version row
        (compare-and-swap), the task row's columns that changed (as the ORM merge), the
        event; each save's event ``seq``, or its refusal."""
        answers: list[Any] = [None] * len(batch)
        tasks = self._rows.table
        async with self._sql.engine.begin() as conn:
            for index in sorted(range(len(batch)), key=lambda i: batch[i][:3]):
                task_id, owner, version, row, data, whole = batch[index]
                swapped = await conn.execute(
                    update(_V)
                    .where(_V.c.task_id == task_id, _V.c.owner == owner)
                    .where(_V.c.version == version - 1)
                    .values(version=version)
                )
                if swapped.rowcount == 0:
                    answers[index] = ConcurrentTaskModificationError(task_id)
                    continue
                key = and_(tasks.c.id == task_id, tasks.c.owner == owner)
                stored = (await conn.execute(select(tasks).where(key))).mappings().one_or_none()
                if stored is None:
                    await conn.execute(insert(tasks), row)
                else:
                    # Only the columns that changed, as the ORM merge: PostgreSQL writes a
                    # column named in an UPDATE again (a long history, at every status).
                    changed = {c: v for c, v in row.items() if stored[c] != v}
                    if changed:
                        await conn.execute(update(tasks).where(key).values(changed))
                if data is not None:
                    ids = {"task_id": task_id, "owner": owner, "task_version": version}
                    inserted = insert(_E).values(**ids, event_data=data).returning(_E.c.seq)
                    seq = answers[index] = (await conn.execute(inserted)).scalar_one()
                    if whole:
                        # A follow-up's event is the whole task, history and all: it
                        # supersedes the task's earlier events for every reader (one
                        # resuming before it gets it first, then what follows), so they
                        # go, in its transaction, and the log holds one copy of the
                        # history, not one per turn (docs/storage.md, *What a long
                        # conversation writes*).
                        superseded = and_(of_task(task_id), _E.c.owner == owner)
                        await conn.execute(delete(_E).where(superseded, _E.c.seq < seq))
        return answers

    async def _cancel(self, task: Task, owner: str, read: int, data: bytes | None) -> TaskVersion:
        """Cancel the stored task, unless it is finished (a concurrent modification), as
        the SDK's store does; but a task saved since the cancel read it (version *read*),
        by its run on another replica, keeps that save and takes the cancel's status
        only. The SDK's store wrote back the task as read: the run's last artifact was
        lost from the task, though its stream, webhooks and event log had it."""
        tasks = self._rows.table
        key = and_(tasks.c.id == task.id, tasks.c.owner == owner)
        row = self._rows.row(task, owner)
        async with self._sql.engine.begin() as conn:
            bumped = update(_V).where(_V.c.task_id == task.id, _V.c.owner == owner)
            bumped = bumped.values(version=_V.c.version + 1).returning(_V.c.version)
            version = (await conn.execute(bumped)).scalar_one_or_none()
            stored = (
                await conn.execute(select(tasks.c.status, tasks.c.protocol_version).where(key))
            ).one_or_none()
            if version is None or stored is None or stored.protocol_version != "1.0":
                raise _OlderRow  # rolled back: the SDK's store knows these rows
            if stored.status.get("state") in _FINISHED:
                raise ConcurrentTaskModificationError(task.id)
            if version - 1 != read:
                row = {column: row[column] for column in ("status", "last_updated")}
            await conn.execute(update(tasks).where(key).values(row))
            seq = None
            if data is not None:
                ids = {"task_id": task.id, "owner": owner, "task_version": version}
                inserted = insert(_E).values(**ids, event_data=data).returning(_E.c.seq)
                seq = (await conn.execute(inserted)).scalar_one()
        if seq is not None:
            self.seqs[task.id, version] = seq
        return TaskVersion(version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version, its streamed artifacts whole as of that version."""
        stored = await super().get(task_id, context)
        if stored is not None and any(in_log(a) for a in stored.task.artifacts):
            await self._put_back(stored.task, self._sql.owner_resolver(context), stored.version)
        return stored

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks (SDK semantics, a page read from an index: ``listing.py``),
        streamed artifacts whole."""
        found = await self._pages.list(params, context)
        owner = self._sql.owner_resolver(context)
        for task in found.tasks:
            if any(in_log(a) for a in task.artifacts):
                await self._put_back(task, owner, None)
        return found

    async def peek(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task's id, context and status only (no artifacts, no history), or ``None``:
        what a resuming subscription needs, without reading a long output."""
        db = self._sql
        model = db.task_model
        stmt = select(model.context_id, model.status, model.protocol_version).where(
            and_(model.id == task_id, model.owner == db.owner_resolver(context))
        )
        async with db.async_session_maker() as session:
            row = (await session.execute(stmt)).one_or_none()
        if row is None:
            return None
        if row[2] != "1.0":  # a row in an older format: the SDK's own conversion
            return await self.get(task_id, context)
        task = Task(id=task_id, context_id=row[0])
        ParseDict(row[1], task.status)
        return StoredTask(task, TaskVersion.MISSING)

    async def _put_back(self, task: Task, owner: str, upto: TaskVersion | None) -> None:
        """Rebuild *task*'s streamed artifacts, in place, from its events (up to *upto*)."""
        marked = {a.artifact_id: a for a in task.artifacts if in_log(a)}
        parts: dict[str, list[Artifact]] = {key: [] for key in marked}
        events = TaskEventModel
        stmt = (
            select(events.task_version, events.event_data)
            .where(and_(events.task_id == task.id, events.owner == owner))
            .order_by(events.seq)
        )
        async with self._sql.async_session_maker() as session:
            rows = await session.stream(stmt.execution_options(yield_per=256))
            async for version, data in rows:
                if upto is not None and TaskVersion(version).is_after(upto):
                    break
                response = StreamResponse.FromString(data)
                kind = response.WhichOneof("payload")
                if kind == "task":  # a first Task event may bring artifacts of its own
                    for artifact in response.task.artifacts:
                        if artifact.artifact_id in parts:
                            parts[artifact.artifact_id] = [artifact]
                elif kind == "artifact_update":
                    update = response.artifact_update
                    chunks = parts.get(update.artifact.artifact_id)
                    if chunks is not None:
                        if not update.append:
                            chunks.clear()
                        chunks.append(update.artifact)
        for key, artifact in marked.items():
            artifact.parts.extend(part for chunk in parts[key] for part in chunk.parts)


async def _retried(attempt: Callable[[], Awaitable[_T]]) -> _T:
    """*attempt*, tried again after lock contention, as the SDK's store retries a save."""
    tries = 0
    while True:
        tries += 1
        try:
            return await attempt()
        except DBAPIError as exc:
            contention = getattr(exc.orig, "sqlstate", None) in _CONTENTION
            if not (isinstance(exc, OperationalError) or contention) or tries >= _TRIES:
                raise
            await asyncio.sleep(_PAUSE_S * tries)


class _OlderRow(Exception):
    """A task without a version row, or stored in an older format."""


def in_log(artifact: Artifact) -> bool:
    """Whether a stored *artifact*'s parts are its events (see the module docstring)."""
    return not artifact.parts


def _take_out(task: Task, event: TaskArtifactUpdateEvent) -> None:
    """Empty the artifact *event* appended to (every part of it is an event)."""
    artifact_id = event.artifact.artifact_id
    for artifact in reversed(task.artifacts):
        if artifact.artifact_id == artifact_id:
            del artifact.parts[:]
            return


#: Most items in one transaction (keeps statements well under SQLite's parameter limit).
MAX_BATCH = 500


class GroupCommit(Generic[_T]):
    """Items handed to :meth:`submit` are written by *write*, in batches: the saves that
    gather while one transaction runs share the next one.

    N concurrent callers pay for a few commits (one WAL flush, one SQLite write lock each)
    instead of N. A batch that fails for any reason but an outage is written again item by
    item, so only the bad item's caller gets the error (issue 40). *write* may also answer
    each item on its own: a list of outcomes (a value, or an exception its caller raises).
    """

    def __init__(self, write: Callable[[list[_T]], Awaitable[list[Any] | None]]) -> None:
        self._write = write
        self._queue: list[tuple[_T, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: _T) -> Any:
        """Write *item*; returns its outcome once its transaction has committed (or raises
        its error)."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_all())
        return await done

    async def aclose(self) -> None:
        """Wait for the batch under way (its callers get its outcome)."""
        if self._writer is not None:
            await asyncio.wait({self._writer})

    async def _write_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._commit(batch)
        finally:
            self._writer = None
            for _, done in self._queue:  # only if the writer itself was canceled
                if not done.done():
                    done.cancel()
            self._queue = []

    async def _commit(self, batch: list[tuple[_T, asyncio.Future[Any]]]) -> None:
        outcome: BaseException | None = None
        answers: list[Any] | None = None
        try:
            answers = await self._write([item for item, _ in batch])
        except Exception as exc:
            if len(batch) > 1 and not is_outage(exc):
                for one in batch:
                    await self._commit([one])
                return
            outcome = exc
        except BaseException as exc:  # canceled: every caller learns it, then it goes on
            outcome = exc
        for index, (_, done) in enumerate(batch):
            if done.done():
                continue
            answer = outcome if answers is None else answers[index]
            if isinstance(answer, BaseException):
                done.set_exception(answer)
            else:
                done.set_result(answer)
        if outcome is not None and not isinstance(outcome, Exception):
            raise outcome
