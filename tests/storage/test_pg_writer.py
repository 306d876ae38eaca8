"""The PostgreSQL group-commit writer's own connection, against the real database.

What the pool's pre-ping gave must still hold: a connection the server closed (restart,
an administrator's ``pg_terminate_backend``) is replaced before the next write, which then
succeeds; an unreachable database is an outage (``OperationalError``, which callers turn
into ``StoreUnavailableError``), not an internal error; a row conflict is SQLAlchemy's
``IntegrityError`` and leaves the connection usable. Rows read back through the SDK's own
store are the tasks that were saved.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from a2a.server.cluster import TaskVersion, VersionedDatabaseTaskStore
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from apcore_a2a.storage._pg_writer import SDK_COLUMNS, WRITER_APPLICATION, PgInsert, PgWriter
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.deferred import DeferredWrites
from apcore_a2a.storage.outages import is_outage

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from ._helpers import blocking, ctx, make_task

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED
pytestmark = pytest.mark.postgres


@pytest.fixture
async def db(pg_url: str) -> AsyncIterator[DatabaseTaskStore]:
    store = DatabaseTaskStore(create_engine(parse_store_url(pg_url)))
    await VersionedDatabaseTaskStore(store.engine).initialize()
    yield store
    await store.engine.dispose()


#: a task row for the two statement tests
ROW = {c: None for c in SDK_COLUMNS["tasks"]} | {
    "id": "a",
    "context_id": "c-1",
    "kind": "task",
    "status": {"state": 3},
}


def _insert(db: DatabaseTaskStore) -> PgInsert:
    return PgInsert(db.task_model.__table__, db.engine.dialect)  # type: ignore[arg-type]


async def _writer_backends(schema: str) -> list[int]:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            f"{WRITER_APPLICATION} {schema}"[:63],
        )
        return [row["pid"] for row in rows]
    finally:
        await conn.close()


async def _terminate(pids: list[int]) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        for pid in pids:
            await conn.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await conn.close()


def _writes(db: DatabaseTaskStore, pg: PgWriter) -> DeferredWrites:
    return DeferredWrites(VersionedDatabaseTaskStore(db.engine), None, pg_writer=pg)


async def _answer(writer: DeferredWrites, task: Task) -> None:
    """A blocking call's life: working kept in memory, its answer written by the writer."""
    context = blocking(made_up=task.id)
    working = make_task(WORKING, task_id=task.id, context_id=task.context_id)
    kept = await writer.save(working, prev_version=TaskVersion.MISSING, context=context)
    await writer.save(task, prev_version=kept, context=context)


async def test_a_closed_connection_is_replaced_before_the_next_write(
    db: DatabaseTaskStore, pg_url: str
) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    writer = _writes(db, PgWriter(parse_store_url(pg_url)))
    first = make_task(COMPLETED)
    await _answer(writer, first)
    (pid,) = await _writer_backends(schema)
    await _terminate([pid])
    await asyncio.sleep(0.2)  # the server's close reaches the client
    second = make_task(COMPLETED)
    await _answer(writer, second)  # no error: a new connection took over
    assert await _writer_backends(schema) not in ([], [pid])
    assert await db.get(first.id, ctx()) == first
    assert await db.get(second.id, ctx()) == second
    await writer.aclose()
    await asyncio.sleep(0.2)
    assert await _writer_backends(schema) == []  # closed with the writer


async def test_an_unreachable_database_is_an_outage(db: DatabaseTaskStore) -> None:
    # Port 1 on the loopback: nothing listens, the connect is refused at once.
    unreachable = parse_store_url(f"postgresql://{PG_USER}@127.0.0.1:1/{PG_DB}")
    writer = _writes(db, PgWriter(unreachable))
    with pytest.raises(OperationalError) as caught:
        await _answer(writer, make_task(COMPLETED))
    assert is_outage(caught.value)
    await writer.aclose()


async def test_a_row_conflict_is_an_integrity_error_and_the_connection_goes_on(
    db: DatabaseTaskStore, pg_url: str
) -> None:
    pg = PgWriter(parse_store_url(pg_url))
    insert = _insert(db)
    row = {**ROW, "id": "t-1"}
    await pg.write([(insert, [row])])
    with pytest.raises(IntegrityError):
        await pg.write([(insert, [row])])
    # The failed transaction was rolled back as a whole: its other row is not there.
    with pytest.raises(IntegrityError):
        await pg.write([(insert, [{**row, "id": "t-2"}, row])])
    await pg.write([(insert, [{**row, "id": "t-3"}])])
    async with db.engine.connect() as conn:
        ids = (await conn.exec_driver_sql("SELECT id FROM tasks ORDER BY id")).scalars().all()
    assert ids == ["t-1", "t-3"]
    await pg.aclose()


async def test_several_steps_are_one_statement_all_or_nothing(
    db: DatabaseTaskStore, pg_url: str
) -> None:
    pg = PgWriter(parse_store_url(pg_url))
    tasks, more = _insert(db), _insert(db)
    row = ROW
    await pg.write([(tasks, [row]), (more, [{**row, "id": "b"}, {**row, "id": "c"}])])
    # The second step conflicts with a stored row: nothing of the statement stays.
    with pytest.raises(IntegrityError):
        await pg.write([(more, [{**row, "id": "d"}]), (tasks, [{**row, "id": "a"}])])
    # A value longer than its column is refused, not cut to fit.
    with pytest.raises(DBAPIError, match="too long"):
        await pg.write([(tasks, [{**row, "id": "e"}]), (tasks, [{**row, "id": "x" * 40}])])
    async with db.engine.connect() as conn:
        found = await conn.exec_driver_sql("SELECT id, status::text FROM tasks ORDER BY id")
        rows = [tuple(r) for r in found]
    assert rows == [("a", '{"state": 3}'), ("b", '{"state": 3}'), ("c", '{"state": 3}')]
    await pg.aclose()
