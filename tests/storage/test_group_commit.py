"""A batch of writes that fails for one row fails only that row's caller (issue 40).

On PostgreSQL, through the writers the server uses (one statement per batch on the
writer's own connection): saves that gathered in one batch with a row the database
refuses (a ``context_id`` longer than its column; the request checks refuse such values
first, ``test_shared_fate_e2e.py``, so these saves come straight to the store) are stored,
each of them; the bad one's caller gets the error; a kept state that cannot be stored is
tried once, not every second forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from a2a.server.cluster import TaskVersion, VersionedDatabaseTaskStore
from a2a.types import Task, TaskState
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.storage._pg_writer import PgWriter
from apcore_a2a.storage._replicas import METADATA, ReplicaRegistry
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.deferred import DeferredWrites

from ._helpers import blocking, ctx, make_task

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED
TOO_LONG = "c" * 40  # the SDK's column holds 36


@pytest.fixture
async def engine_and_writer(pg_url: str) -> AsyncIterator[tuple[AsyncEngine, PgWriter]]:
    store_url = parse_store_url(pg_url)
    engine = create_engine(store_url)
    writer = PgWriter(store_url)
    yield engine, writer
    await writer.aclose()
    await engine.dispose()


async def _save_all(
    save: Callable[[Task], Awaitable[object]], tasks: list[Task]
) -> list[BaseException | None]:
    results = await asyncio.gather(*(save(t) for t in tasks), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


async def _cluster(engine: AsyncEngine) -> VersionedDatabaseTaskStore:
    versioned = VersionedDatabaseTaskStore(engine)
    await versioned.initialize()
    async with engine.begin() as conn:
        await conn.run_sync(METADATA.create_all)
    return versioned


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_one_bad_row_fails_only_its_own_save(
    engine_and_writer: tuple[AsyncEngine, PgWriter], cluster: bool
) -> None:
    engine, writer = engine_and_writer
    versioned = await _cluster(engine)
    registry = ReplicaRegistry(engine, heartbeat_interval=1, replica_timeout=5)
    store = DeferredWrites(versioned, registry if cluster else None, pg_writer=writer)

    async def answer(task: Task) -> None:
        # A blocking call's life: working kept in memory, then the answer in one write.
        context = blocking(made_up=task.id)
        working = make_task(WORKING, task_id=task.id, context_id=task.context_id)
        first = TaskVersion.MISSING
        v1 = await store.save(working, event=None, prev_version=first, context=context)
        await store.save(task, event=None, prev_version=v1, context=context)

    tasks = [make_task(COMPLETED) for _ in range(20)]
    tasks.insert(3, make_task(COMPLETED, context_id=TOO_LONG))
    outcomes = await _save_all(answer, tasks)
    assert [i for i, o in enumerate(outcomes) if o is not None] == [3]
    assert isinstance(outcomes[3], DBAPIError)
    for i, task in enumerate(tasks):
        assert (await versioned.get(task.id, ctx()) is None) == (i == 3)
    await store.aclose()


async def test_a_kept_state_the_store_refuses_is_not_retried(
    engine_and_writer: tuple[AsyncEngine, PgWriter], caplog: pytest.LogCaptureFixture
) -> None:
    engine, writer = engine_and_writer
    versioned = await _cluster(engine)
    registry = ReplicaRegistry(engine, heartbeat_interval=1, replica_timeout=5)
    store = DeferredWrites(versioned, registry, delay=0.05, pg_writer=writer)
    bad = make_task(WORKING, context_id=TOO_LONG)
    context = blocking(made_up=bad.id)
    caplog.set_level(logging.WARNING, logger="apcore_a2a.storage.deferred")
    version = await store.save(bad, event=None, prev_version=TaskVersion.MISSING, context=context)
    await asyncio.sleep(1.0)  # twenty delays: it was tried once
    failed = [r for r in caplog.records if "deferred write failed" in r.getMessage()]
    assert len(failed) == 1, [r.getMessage() for r in failed]
    assert "given up" in failed[0].getMessage()
    # Its caller learns it at the task's next save.
    done = make_task(COMPLETED, task_id=bad.id, context_id=TOO_LONG)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's or the database's refusal
        await store.save(done, event=None, prev_version=version, context=context)
    assert await versioned.get(bad.id, ctx()) is None
    await store.aclose()


async def test_one_bad_row_among_event_saves_fails_only_its_own_save(
    engine_and_writer: tuple[AsyncEngine, PgWriter],
) -> None:
    """Saves of stored tasks (a stream's events) share a transaction; the one whose row
    the database refuses fails alone, and its task stays as it was."""
    from a2a.types import TaskStatusUpdateEvent

    from apcore_a2a.storage.streamed import ChunkedTaskStore

    engine, _writer = engine_and_writer
    store = ChunkedTaskStore(engine)
    await store.initialize()
    tasks = [make_task(WORKING) for _ in range(12)]
    firsts = {}
    for task in tasks:
        firsts[task.id] = await store.save(task, prev_version=TaskVersion.MISSING, context=ctx())
    tasks[4].context_id = TOO_LONG

    async def event(task: Task) -> object:
        done = Task()
        done.CopyFrom(task)
        done.status.state = COMPLETED
        update = TaskStatusUpdateEvent(task_id=task.id, context_id=task.id, status=done.status)
        return await store.save(done, event=update, prev_version=firsts[task.id], context=ctx())

    outcomes = await _save_all(event, tasks)
    assert [i for i, o in enumerate(outcomes) if o is not None] == [4]
    assert isinstance(outcomes[4], DBAPIError)
    for i, task in enumerate(tasks):
        stored = await store.get(task.id, ctx())
        assert stored is not None
        assert stored.task.status.state == (WORKING if i == 4 else COMPLETED)
    await store.aclose()
