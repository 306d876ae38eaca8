"""Group commit for the SDK's ``tasks`` table: the saves that arrive together share one
transaction.

The SDK's ``DatabaseTaskStore.save`` is an ORM ``merge`` in a transaction of its own: a
read, then an insert or update, then a commit -- per save. Under concurrency the commits
queue behind each other (SQLite has one writer; PostgreSQL one WAL flush per commit).
:class:`BatchedTaskWriter` has one writer coroutine: while it writes a batch, the next
saves gather, and then go as a single upsert (``INSERT ... ON CONFLICT (id) DO UPDATE``)
in one transaction. Alone, a save is written at once, as before.

On a SQLite file the transaction runs on a writer thread of its own through a synchronous
engine (``_engine.create_sqlite_writer_engine``): one hop per batch instead of one per
statement through aiosqlite. On PostgreSQL it runs on a connection of the writer's own
(:mod:`._pg_writer`), without the pool's checkout and pre-ping per batch.

The rows are exactly what the SDK store writes (:mod:`._task_rows`), so the SDK store
reads them back unchanged; owner scoping is the SDK's owner resolver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy import Engine
from sqlalchemy.dialects import postgresql, sqlite

from ._group_commit import GroupCommit
from ._pg_writer import PgInsert, PgWriter
from ._task_rows import TaskRows

__all__ = ["BatchedTaskWriter"]


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
            self._pg_upsert = PgInsert(
                table, self._rows.columns, store.engine.dialect, conflict_key="id"
            )

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Write *task* for the caller of *context*; returns once it is committed."""
        await self._group.submit(self._rows.row(task, self._owner(context)))

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        # One row per task: the last save of a task in the batch is its newest state (an
        # upsert may not touch a row twice in one statement).
        rows = list({row["id"]: row for row in batch}.values())
        await self.store._ensure_initialized()
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
