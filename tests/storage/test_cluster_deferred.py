"""DeferredWrites over the SDK's versioned store on a real database.

The end-to-end behaviour with two replicas is in test_cluster_write_path_e2e.py; these pin
what a server run cannot time: compare-and-swap against kept versions, owner scoping,
the delay's write racing the answer, batches where one task's rows conflict, and close.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from a2a.server.cluster import TaskVersion, VersionedDatabaseTaskStore
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.types import TaskState, TaskStatusUpdateEvent

from apcore_a2a.edge.call import record_of
from apcore_a2a.storage._pg_writer import PgWriter
from apcore_a2a.storage._replicas import METADATA, ReplicaRegistry
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.deferred import DeferredWrites

from ._helpers import blocking, ctx, make_task

WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED


@pytest.fixture
async def versioned(sql_url: str) -> AsyncIterator[VersionedDatabaseTaskStore]:
    engine = create_engine(parse_store_url(sql_url))
    store = VersionedDatabaseTaskStore(engine)
    await store.initialize()
    async with engine.begin() as conn:
        await conn.run_sync(METADATA.create_all)
    yield store
    await engine.dispose()


@pytest.fixture
async def writer(sql_url: str) -> AsyncIterator[PgWriter | None]:
    """PostgreSQL: the writer's own connection, as the server wires it."""
    store_url = parse_store_url(sql_url)
    pg = PgWriter(store_url) if store_url.kind == "postgresql" else None
    yield pg
    if pg is not None:
        await pg.aclose()


def deferred(
    store: VersionedDatabaseTaskStore, writer: PgWriter | None, delay: float = 60.0
) -> DeferredWrites:
    engine = store.as_task_store.engine  # type: ignore[attr-defined]
    registry = ReplicaRegistry(engine, heartbeat_interval=1, replica_timeout=5)
    return DeferredWrites(store, registry, delay=delay, pg_writer=writer)


def _event(task_id: str, context_id: str, state: TaskState) -> TaskStatusUpdateEvent:
    event = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id)
    event.status.state = state
    return event


async def test_kept_versions_count_as_the_store_would_and_land_whole(
    versioned: VersionedDatabaseTaskStore,
    writer: PgWriter | None,
) -> None:
    store = deferred(versioned, writer)
    task = make_task(WORKING)
    context = blocking(made_up=task.id)
    v1 = await store.save(task, event=None, prev_version=TaskVersion.MISSING, context=context)
    v2 = await store.save(
        task,
        event=_event(task.id, task.context_id, WORKING),
        prev_version=v1,
        context=context,
    )
    assert (v1, v2) == (TaskVersion(1), TaskVersion(2))
    assert await versioned.get(task.id, ctx()) is None  # nothing written yet
    kept = await store.get(task.id, ctx())
    assert kept is not None and kept.version == TaskVersion(2) and kept.task == task
    assert await store.get(task.id, ctx("mallory")) is None
    # A stale writer loses, as against the store.
    with pytest.raises(ConcurrentTaskModificationError):
        await store.save(task, prev_version=v1, context=context)
    task.status.state = COMPLETED
    v3 = await store.save(
        task, event=_event(task.id, task.context_id, COMPLETED), prev_version=v2, context=context
    )
    stored = await versioned.get(task.id, ctx())
    assert stored is not None and stored.version == v3 == TaskVersion(3)
    assert stored.task == task
    # After the answer the store itself takes the next save, with the same versions.
    task.status.state = TaskState.TASK_STATE_CANCELED
    with pytest.raises(ConcurrentTaskModificationError):  # terminal: the SDK's own rule
        await store.save(task, prev_version=v3, context=ctx())


async def test_only_a_new_blocking_task_is_kept(
    versioned: VersionedDatabaseTaskStore, writer: PgWriter | None
) -> None:
    store = deferred(versioned, writer)
    for context in (ctx(), blocking(made_up="someone-else")):
        record_of(context).defer_writes = True
        task = make_task(WORKING)
        await store.save(task, prev_version=TaskVersion.MISSING, context=context)
        assert await versioned.get(task.id, ctx()) is not None  # written at once


async def test_the_delay_writes_a_running_task_and_the_answer_follows_it(
    versioned: VersionedDatabaseTaskStore,
    writer: PgWriter | None,
) -> None:
    # delay 0: the running state starts being written on the next loop turn; the answer
    # must wait for it and then compare-and-swap on the version it wrote.
    store = deferred(versioned, writer, delay=0.0)
    for _ in range(10):
        task = make_task(WORKING)
        context = blocking(made_up=task.id)
        version = await store.save(task, prev_version=TaskVersion.MISSING, context=context)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.status.state = COMPLETED
        final = await store.save(task, prev_version=version, context=context)
        stored = await versioned.get(task.id, ctx())
        assert stored is not None and stored.task.status.state == COMPLETED
        assert stored.version == final == TaskVersion(2)


async def test_a_conflicting_task_fails_alone_in_a_shared_transaction(
    versioned: VersionedDatabaseTaskStore,
    writer: PgWriter | None,
) -> None:
    store = deferred(versioned, writer)
    # A row already holds this id (written outside the deferral): its insert conflicts.
    clash = make_task(WORKING)
    await versioned.save(clash, prev_version=TaskVersion.MISSING, context=ctx())
    tasks = [clash] + [make_task(WORKING) for _ in range(5)]
    contexts = [blocking(made_up=task.id) for task in tasks]
    for task, context in zip(tasks, contexts, strict=True):
        await store.save(task, prev_version=TaskVersion.MISSING, context=context)

    async def answer(task, context):  # type: ignore[no-untyped-def]
        task.status.state = COMPLETED
        return await store.save(task, prev_version=TaskVersion(1), context=context)

    outcomes = await asyncio.gather(
        *(answer(t, c) for t, c in zip(tasks, contexts, strict=True)), return_exceptions=True
    )
    assert isinstance(outcomes[0], ConcurrentTaskModificationError)
    assert outcomes[1:] == [TaskVersion(2)] * 5
    for task in tasks[1:]:
        stored = await versioned.get(task.id, ctx())
        assert stored is not None and stored.task.status.state == COMPLETED


async def test_close_writes_what_is_kept(
    versioned: VersionedDatabaseTaskStore, writer: PgWriter | None
) -> None:
    store = deferred(versioned, writer)
    task = make_task(WORKING)
    await store.save(task, prev_version=TaskVersion.MISSING, context=blocking(made_up=task.id))
    assert await versioned.get(task.id, ctx()) is None
    await store.aclose()
    stored = await versioned.get(task.id, ctx())
    assert stored is not None and stored.version == TaskVersion(1) and stored.task == task
