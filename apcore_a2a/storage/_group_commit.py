"""Group commit: writes that arrive while a transaction is under way share the next one.

One writer coroutine per :class:`GroupCommit`. Alone, an item is written at once; under
concurrency the items that gathered during a transaction go together in the next one, so
N concurrent callers pay for a few commits (one WAL flush, one SQLite write lock each)
instead of N. A batch that fails on a row conflict (``IntegrityError``) is written again
item by item, so one bad row fails only its own caller; any other error (an outage)
fails the whole batch at once.

:class:`BatchedTaskWriter` is the group commit of the SDK's ``tasks`` table (without
cluster mode; the cluster one is in :mod:`.cluster_deferred`). The SDK's
``DatabaseTaskStore.save`` is an ORM ``merge`` in a transaction of its own: a read, then
an insert or update, then a commit -- per save. Here the saves that gathered go as a
single upsert (``INSERT ... ON CONFLICT (id) DO UPDATE``) in one transaction: on a SQLite
file on a writer thread of its own through a synchronous engine
(``_engine.create_sqlite_writer_engine``: one hop per batch instead of one per statement
through aiosqlite), on PostgreSQL on a connection of the writer's own (:mod:`._pg_writer`).
The rows are exactly what the SDK store writes (``upstream/sql_task_rows.py``), so it
reads them back unchanged; owner scoping is the SDK's owner resolver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from apcore_a2a.upstream.sql_task_rows import TaskRows

from ._pg_writer import PgInsert, PgWriter

__all__ = ["MAX_BATCH", "BatchedTaskWriter", "GroupCommit"]

#: Most items in one transaction (keeps statements well under SQLite's parameter limit).
MAX_BATCH = 500

_T = TypeVar("_T")


class GroupCommit(Generic[_T]):
    """Items for *write* (one transaction per call), grouped as the module docstring says."""

    def __init__(
        self, write: Callable[[list[_T]], Awaitable[None]], *, max_batch: int = MAX_BATCH
    ) -> None:
        self._write = write
        self._max_batch = max_batch
        self._queue: list[tuple[_T, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: _T) -> None:
        """Write *item*; returns once its transaction has committed (or raises its error)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_all())
        await done

    async def aclose(self) -> None:
        """Wait for the batch under way (its callers get its outcome)."""
        writer = self._writer
        if writer is not None:
            await asyncio.wait({writer})

    async def _write_all(self) -> None:
        try:
            while self._queue:
                n = self._max_batch
                batch, self._queue = self._queue[:n], self._queue[n:]
                try:
                    await self._write([item for item, _ in batch])
                except IntegrityError as exc:
                    if len(batch) == 1:
                        _settle(batch, exc)
                    else:
                        for item, done in batch:
                            await self._write_one(item, done)
                except BaseException as exc:
                    _settle(batch, exc)
                    if not isinstance(exc, Exception):
                        raise
                else:
                    _settle(batch, None)
        finally:
            self._writer = None
            for _, done in self._queue:  # only if the writer itself was canceled
                if not done.done():
                    done.cancel()
            self._queue = []

    async def _write_one(self, item: _T, done: asyncio.Future[None]) -> None:
        try:
            await self._write([item])
        except Exception as exc:
            _settle([(item, done)], exc)
        else:
            _settle([(item, done)], None)


def _settle(batch: list[tuple[_T, asyncio.Future[None]]], exc: BaseException | None) -> None:
    for _, done in batch:
        if done.done():
            continue
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)


class BatchedTaskWriter:
    """Saves for *store*'s table, grouped as the module docstring says."""

    def __init__(
        self,
        store: DatabaseTaskStore,
        *,
        sync_engine: Engine | None = None,
        pg_writer: PgWriter | None = None,
    ) -> None:
        self.store = store
        self._sync_engine = sync_engine
        self._thread = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="apcore-a2a-sqlite-writer")
            if sync_engine is not None
            else None
        )
        self._owner: Callable[[ServerCallContext], str] = store.owner_resolver
        self._rows = TaskRows(store)
        table = self._rows.table
        insert = postgresql.insert if store.engine.dialect.name == "postgresql" else sqlite.insert
        statement = insert(table)
        #: built once, executed with a list of rows (SQLAlchemy sends them as one
        #: multi-row statement: "insertmanyvalues")
        self._upsert = statement.on_conflict_do_update(
            index_elements=[table.c.id],
            set_={c: statement.excluded[c] for c in self._rows.columns if c != "id"},
        )
        self._group: GroupCommit[dict[str, Any]] = GroupCommit(self._write)
        #: PostgreSQL: the batches go through a connection of the writer's own
        self._pg = pg_writer
        if pg_writer is not None:
            self._pg_upsert = PgInsert(table, store.engine.dialect, conflict_key="id")

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Write *task* for the caller of *context*; returns once it is committed."""
        await self._group.submit(self._rows.row(task, self._owner(context)))

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        # One row per task: the last save of a task in the batch is its newest state (an
        # upsert may not touch a row twice in one statement).
        rows = list({row["id"]: row for row in batch}.values())
        await self.store.initialize()  # once: the table exists from then on
        if self._thread is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._thread, self._write_sync, rows)
            return
        if self._pg is not None:
            await self._pg.write([(self._pg_upsert, rows)])
            return
        async with self.store.engine.begin() as conn:
            await conn.execute(self._upsert, rows)

    def _write_sync(self, rows: list[dict[str, Any]]) -> None:
        assert self._sync_engine is not None
        with self._sync_engine.begin() as conn:
            conn.execute(self._upsert, rows)

    async def aclose(self) -> None:
        """Let the writer finish its batch, then release the writer thread and its engine."""
        await self._group.aclose()
        if self._pg is not None:
            await self._pg.aclose()
        if self._thread is not None and self._sync_engine is not None:
            # Closed on the thread that opened its connection (sqlite3 objects belong to one).
            await asyncio.get_running_loop().run_in_executor(
                self._thread, self._sync_engine.dispose
            )
            self._thread.shutdown(wait=True)
            self._thread = None
