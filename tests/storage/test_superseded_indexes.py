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

from ._helpers import index_names, settings

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
async def test_the_drop_queues_no_reader_of_tasks_on_postgresql(pg_url: str) -> None:
    """A replica of the new release starting while others serve: a reader's transaction
    open on ``tasks`` holds the drop back, and readers coming after it still read (a
    plain ``DROP INDEX`` waits for an exclusive lock on ``tasks``, and every later read
    of the table queues behind it)."""
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
                "USING (pid) WHERE NOT l.granted AND a.query ILIKE 'DROP INDEX%'"
            )
            deadline = time.monotonic() + WAIT_S
            while not (held := (await watcher.execute(waiting)).all()):
                assert not start.done() and time.monotonic() < deadline, "the drop did not wait"
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
