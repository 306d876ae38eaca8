"""DeferredWrites (and its group-commit writer) over the SDK's DatabaseTaskStore on a SQLite file.

The end-to-end behaviour (one write per blocking call, recovery after kill -9) is in
test_write_path_e2e.py; these pin the rules a server run cannot time: owner scoping of
kept states, write order when a kept write is under way, and batching.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import TaskState

from apcore_a2a.edge.call import record_of
from apcore_a2a.storage._urls import create_engine, create_sqlite_writer_engine, parse_store_url
from apcore_a2a.storage.deferred import DeferredWrites

from ._helpers import blocking, ctx, make_task

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[DatabaseTaskStore]:
    engine = create_engine(parse_store_url(f"sqlite:///{tmp_path / 'tasks.db'}"))
    store = DatabaseTaskStore(engine)
    await store.initialize()
    yield store
    await engine.dispose()


def deferred(db: DatabaseTaskStore, delay: float = 60.0) -> DeferredWrites:
    return DeferredWrites(db, delay=delay)


async def test_a_kept_state_is_seen_by_its_owner_only_and_not_yet_stored(
    db: DatabaseTaskStore,
) -> None:
    store = deferred(db)
    task = make_task(WORKING)
    await store.save(task, blocking("alice"))
    assert await db.get(task.id, ctx("alice")) is None  # nothing written
    seen = await store.get(task.id, ctx("alice"))
    assert seen == task
    assert await store.get(task.id, ctx("mallory")) is None
    # The answer's state goes straight to the database.
    done = make_task(COMPLETED, task_id=task.id, context_id=task.context_id)
    await store.save(done, blocking("alice"))
    assert await db.get(task.id, ctx("alice")) == done
    assert await db.get(task.id, ctx("mallory")) is None


async def test_a_made_up_id_is_not_looked_up_until_it_is_saved(db: DatabaseTaskStore) -> None:
    store = deferred(db)
    existing = make_task(COMPLETED)
    await db.save(existing, ctx("alice"))
    context = ctx("alice")
    record_of(context).new_task = existing.id  # as if this request had made it up
    assert await store.get(existing.id, context) is None
    await store.save(existing, context)  # the first save ends the mark
    assert record_of(context).new_task is None
    assert await store.get(existing.id, context) == existing


async def test_the_answer_lands_after_a_kept_write_already_under_way(
    db: DatabaseTaskStore,
) -> None:
    # delay 0: the kept state starts being written on the next loop turn; the final
    # write must wait for it, or the database could end with "working".
    store = deferred(db, delay=0.0)
    for _ in range(20):
        task = make_task(WORKING)
        await store.save(task, blocking())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        done = make_task(COMPLETED, task_id=task.id, context_id=task.context_id)
        await store.save(done, blocking())
        await asyncio.sleep(0.01)
        stored = await db.get(task.id, ctx())
        assert stored is not None and stored.status.state == COMPLETED


async def test_a_long_call_is_written_after_the_delay_and_on_close(
    db: DatabaseTaskStore,
) -> None:
    store = deferred(db, delay=0.05)
    task = make_task(WORKING)
    await store.save(task, blocking())
    for _ in range(200):
        if await db.get(task.id, ctx()) is not None:
            break
        await asyncio.sleep(0.01)
    assert await db.get(task.id, ctx()) == task
    # Kept again after a later passing save, and written when the store closes.
    store = deferred(db)
    later = make_task(WORKING, text="later")
    await store.save(later, blocking())
    await store.aclose()
    assert await db.get(later.id, ctx()) == later


@pytest.mark.parametrize("mode", ["async engine", "writer thread"])
async def test_concurrent_saves_share_transactions_and_keep_each_row(
    db: DatabaseTaskStore, tmp_path: Path, mode: str
) -> None:
    writer = _writer(db, tmp_path, mode)
    tasks = [make_task(COMPLETED, text=f"t{i}") for i in range(60)]
    # The same task saved twice within one batch: the later state wins.
    first = make_task(WORKING, text="x")
    last = make_task(COMPLETED, task_id=first.id, context_id=first.context_id, text="y")
    await asyncio.gather(
        *(writer.save(t, ctx(f"user{i % 3}")) for i, t in enumerate(tasks)),
        writer.save(first, ctx()),
        writer.save(last, ctx()),
    )
    for i, t in enumerate(tasks):
        assert await db.get(t.id, ctx(f"user{i % 3}")) == t
    assert await db.get(first.id, ctx()) == last
    await writer.aclose()


def _writer(db: DatabaseTaskStore, tmp_path: Path, mode: str) -> DeferredWrites:
    if mode == "async engine":
        return DeferredWrites(db)
    url = parse_store_url(f"sqlite:///{tmp_path / 'tasks.db'}")
    return DeferredWrites(db, sync_engine=create_sqlite_writer_engine(url))


def _writer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("apcore-a2a-sqlite")]


async def test_the_writer_thread_commits_reports_errors_and_ends_on_close(
    db: DatabaseTaskStore, tmp_path: Path
) -> None:
    writer = _writer(db, tmp_path, "writer thread")
    task = make_task(COMPLETED)
    await writer.save(task, ctx())
    assert _writer_threads()
    # Committed on the file: a fresh engine (another connection) reads it.
    other = DatabaseTaskStore(create_engine(parse_store_url(f"sqlite:///{tmp_path / 'tasks.db'}")))
    try:
        assert await other.get(task.id, ctx()) == task
        # A failed transaction reaches every caller of its batch, and the writer goes on.
        async with other.engine.begin() as conn:
            await conn.exec_driver_sql(
                "CREATE TRIGGER no_more BEFORE INSERT ON tasks BEGIN SELECT RAISE(ABORT, 'full'); END"
            )
        results = await asyncio.gather(
            *(writer.save(make_task(COMPLETED), ctx()) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, Exception) and "full" in str(r) for r in results)
        async with other.engine.begin() as conn:
            await conn.exec_driver_sql("DROP TRIGGER no_more")
        later = make_task(COMPLETED, text="later")
        await writer.save(later, ctx())
        assert await other.get(later.id, ctx()) == later
    finally:
        await other.engine.dispose()
    await writer.aclose()
    assert not _writer_threads()
