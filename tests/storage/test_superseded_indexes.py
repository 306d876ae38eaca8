"""An index a release replaced is dropped where a store starts (and by ``db upgrade``,
``test_db_upgrade.py``): on SQLite and PostgreSQL, again without effect, by processes
starting together, and on PostgreSQL without queueing the readers of ``tasks``.

Our migrations created, over all releases (``git log -p`` of ``storage/``): the context
index ``ix_apcore_a2a_tasks_context_owner`` (``context_id, owner``), replaced by
``ix_apcore_a2a_tasks_context_owner_updated_id``; the others (the status and event
indexes, the cluster tables' own) kept their names and columns.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.contexts import INDEX_NAME, OLD_INDEX_NAME

from .._postgres import pg_database_url, pg_schema_url
from ._helpers import ctx, index_names, make_task, settings
from .test_contract import save

#: every index of ours a release replaced, with its columns as that release created it
SUPERSEDED = {OLD_INDEX_NAME: "context_id, owner"}
#: how long a test waits for the start to reach the drop (a bound, not a measure)
WAIT_S = 60.0


async def _as_the_old_release_left_it(url: str) -> None:
    engine = create_engine(parse_store_url(url))
    try:
        await DatabaseTaskStore(engine).initialize()
        async with engine.begin() as conn:
            for name, columns in SUPERSEDED.items():
                await conn.execute(text(f"CREATE INDEX {name} ON tasks ({columns})"))
    finally:
        await engine.dispose()


async def test_a_start_drops_the_superseded_index_and_a_second_start_changes_nothing(
    sql_url: str,
) -> None:
    await _as_the_old_release_left_it(sql_url)
    assert set(SUPERSEDED) <= await index_names(sql_url)
    for _ in range(2):
        stores = open_stores(sql_url, settings())
        await stores.start()
        await stores.aclose()
        names = await index_names(sql_url)
        assert INDEX_NAME in names and not set(SUPERSEDED) & names, names


async def start_together(pg_url: str, count: int = 3) -> None:
    """Start *count* cluster replicas on *pg_url* at once, then stop them."""
    replicas = [open_stores(pg_url, settings(cluster=True)) for _ in range(count)]
    try:
        await asyncio.gather(*(replica.start() for replica in replicas))
    finally:
        for replica in replicas:
            await replica.aclose()


@pytest.mark.postgres
async def test_replicas_starting_together_on_postgresql_all_start(pg_url: str) -> None:
    await _as_the_old_release_left_it(pg_url)
    await start_together(pg_url)
    names = await index_names(pg_url)
    assert INDEX_NAME in names and not set(SUPERSEDED) & names, names


@pytest.mark.postgres
async def test_the_drop_queues_no_reader_of_tasks_on_postgresql() -> None:
    """A replica of the new release starting while others serve: a reader's transaction
    open on ``tasks`` holds the drop back, and readers coming after it still read (a
    plain ``DROP INDEX`` waits for an exclusive lock on ``tasks``, and every later read
    of the table queues behind it). In a database of its own: the drop seen waiting is
    this test's, whatever other test processes run on the server."""
    async with pg_database_url(agents=1) as url:
        await _the_drop_queues_no_reader(url)


async def _the_drop_queues_no_reader(pg_url: str) -> None:
    await _as_the_old_release_left_it(pg_url)
    engine = create_engine(parse_store_url(pg_url))
    stores = open_stores(pg_url, settings(cluster=True))
    try:
        async with engine.connect() as reader, engine.connect() as watcher:
            await reader.begin()
            await reader.execute(text("SELECT count(*) FROM tasks"))
            start = asyncio.create_task(stores.start())
            waiting = text(
                "SELECT l.mode, l.locktype FROM pg_locks l JOIN pg_stat_activity a "
                "USING (pid) WHERE NOT l.granted AND a.query ILIKE 'DROP INDEX%' "
                "AND a.datname = current_database()"
            )
            deadline = time.monotonic() + WAIT_S
            while not (held := (await watcher.execute(waiting)).all()):
                if start.done():
                    start.result()  # a start that failed says why
                    raise AssertionError("the start ended without waiting to drop the index")
                assert time.monotonic() < deadline, "the drop did not wait"
                await asyncio.sleep(0.05)
            assert ("AccessExclusiveLock", "relation") not in held, held
            async with engine.connect() as later:
                await later.execute(text("SET lock_timeout = '10s'"))
                await later.execute(text("SELECT count(*) FROM tasks"))
            await reader.rollback()
            await start
    finally:
        await stores.aclose()
        await engine.dispose()
    names = await index_names(pg_url)
    assert INDEX_NAME in names and not set(SUPERSEDED) & names, names


@pytest.mark.postgres
@pytest.mark.parametrize("isolation", ["READ COMMITTED", "REPEATABLE READ"])
async def test_a_long_transaction_in_another_schema_holds_no_start_back(
    pg_url: str, isolation: str
) -> None:
    """An agent starting in a database shared with a busy application: a transaction of
    that application in another schema, open all the while (a snapshot held, a row
    written), neither fails nor holds back the start's index steps (the new index's build,
    the superseded one's drop), and the agent serves. A ``CREATE INDEX CONCURRENTLY`` would
    wait for every transaction of the database; a plain build and a concurrent drop wait
    only for those using ``tasks`` in the agent's own schema."""
    await _as_the_old_release_left_it(pg_url)
    async with pg_schema_url(agents=1) as other_url:
        other = create_engine(parse_store_url(other_url))
        stores = open_stores(pg_url, settings(cluster=True))
        try:
            async with other.connect() as busy:
                await busy.execute(text(f"SET TRANSACTION ISOLATION LEVEL {isolation}"))
                await busy.execute(text("CREATE TABLE orders (id int)"))
                await busy.execute(text("INSERT INTO orders VALUES (1)"))
                await busy.execute(text("SELECT txid_current()"))  # an xid of its own
                async with asyncio.timeout(WAIT_S):  # a hang guard, not a measure
                    await stores.start()
                task = make_task()
                await save(stores, task)
                assert await stores.get_task(task.id, ctx()) == task
                await busy.rollback()
        finally:
            await stores.aclose()
            await other.dispose()
    names = await index_names(pg_url)
    assert INDEX_NAME in names and not set(SUPERSEDED) & names, names
