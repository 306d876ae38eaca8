"""SQL retention: finished tasks older than the period are deleted; the rest stay."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from a2a.server.cluster import TaskVersion, VersionedTaskStore
from a2a.types import TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.storage import open_stores
from apcore_a2a.storage.quota_slots import PUSH_SCOPE

from ._helpers import ago, ctx, make_task, settings
from .test_recovery import eventually, put


async def noted_long_ago(stores: Any, *task_ids: str) -> None:
    """Note *task_ids* as finished long ago by the database (``storage/retention.py``)."""
    assert stores.engine is not None
    async with stores.engine.begin() as conn:
        for task_id in task_ids:
            await conn.execute(
                text("INSERT INTO apcore_a2a_finished_tasks VALUES (:id, 0)"), {"id": task_id}
            )


async def test_old_finished_tasks_are_purged_periodically(sql_url: str) -> None:
    future = datetime.now(UTC) + timedelta(hours=1)
    old_done = make_task(TaskState.TASK_STATE_COMPLETED, at=ago(3600))
    old_failed = make_task(TaskState.TASK_STATE_FAILED, at=ago(3600))
    old_waiting = make_task(TaskState.TASK_STATE_INPUT_REQUIRED, at=ago(3600))
    fresh_done = make_task(TaskState.TASK_STATE_COMPLETED, at=future)
    # Everything is written before any purge can run: a purge between the task and its
    # push config would leave the config behind (it belongs to no purged task then).
    writer = open_stores(sql_url, settings())
    await writer.start()
    try:
        for task in (old_done, old_failed, old_waiting, fresh_done):
            await put(writer, task)
        await writer.push_config_store.set_info(
            old_done.id,
            TaskPushNotificationConfig(task_id=old_done.id, id="c", url="https://e.x/h"),
            ctx(),
        )
        await noted_long_ago(writer, old_done.id, old_failed.id, old_waiting.id)
    finally:
        await writer.aclose()
    # Retention 2 s -> the purge runs every 0.5 s. fresh_done is noted at the first pass,
    # which deletes the others, and kept for 2 s from then.
    stores = open_stores(sql_url, settings(task_retention_seconds=2.0))
    await stores.start()
    try:

        async def purged() -> bool:
            return await stores.get_task(old_done.id, ctx()) is None

        await eventually(purged)
        assert await stores.get_task(old_failed.id, ctx()) is None
        assert await stores.get_task(old_waiting.id, ctx()) is not None
        assert await stores.get_task(fresh_done.id, ctx()) is not None
        assert await stores.push_config_store.get_info(old_done.id, ctx()) == []
    finally:
        await stores.aclose()


async def test_cluster_retention_also_drops_versions_and_events(sql_url: str) -> None:
    stores = open_stores(sql_url, settings(task_retention_seconds=2.0, cluster=True))
    await stores.start()
    try:
        # Written while running (never purged), so the event row can be seen first.
        old_done = make_task(TaskState.TASK_STATE_WORKING, at=ago(3600))
        # A push config's quota slot (push/configs.py) goes with its task.
        assert stores.quota_slots is not None
        assert await stores.quota_slots.take(PUSH_SCOPE, old_done.id, "r:1", 3)
        await stores.quota_slots.rename(PUSH_SCOPE, "r:1", "c:config")
        store = stores.task_store
        assert isinstance(store, VersionedTaskStore)
        version = TaskVersion.MISSING
        for state in (TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED):
            old_done.status.state = state
            event = TaskStatusUpdateEvent(
                task_id=old_done.id, context_id=old_done.context_id, status=old_done.status
            )
            version = await store.save(
                old_done, event=event, prev=None, prev_version=version, context=ctx()
            )
            assert stores.engine is not None
            if state == TaskState.TASK_STATE_WORKING:
                assert await count_rows(stores.engine, "task_events", old_done.id) == 1

        async def purged() -> bool:
            return await stores.get_task(old_done.id, ctx()) is None

        await eventually(purged)
        for table in ("task_versions", "task_events"):
            assert await count_rows(stores.engine, table, old_done.id) == 0, table
        assert await stores.quota_slots.holders(PUSH_SCOPE, old_done.id) == []
    finally:
        await stores.aclose()


async def count_rows(engine: AsyncEngine, table: str, task_id: str) -> int:
    async with engine.connect() as conn:
        result = await conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE task_id = :id"), {"id": task_id}
        )
        return int(result.scalar_one())


async def test_without_retention_nothing_is_deleted(sql_url: str) -> None:
    stores = open_stores(sql_url, settings())
    await stores.start()
    try:
        old_done = make_task(TaskState.TASK_STATE_COMPLETED, at=ago(10 * 365 * 86400))
        await put(stores, old_done)
        # Restarting runs every startup step; still nothing goes.
        await stores.aclose()
        stores = open_stores(sql_url, settings())
        await stores.start()
        assert await stores.get_task(old_done.id, ctx()) is not None
    finally:
        await stores.aclose()


async def test_a_subscriber_behind_a_purged_task_ends_instead_of_waiting_for_ever(
    sql_url: str,
) -> None:
    """Replica A purges a finished task while a subscriber on replica B has not read its
    last events yet (a client that stopped reading for longer than the retention): the
    subscription ends, rather than wait for events that can no longer come."""
    a = open_stores(sql_url, settings(cluster=True, task_retention_seconds=2.0))
    b = open_stores(sql_url, settings(cluster=True, cluster_poll_interval=0.1))
    await a.start()
    await b.start()
    try:
        task = make_task(TaskState.TASK_STATE_WORKING, at=ago(3600))
        store = a.task_store
        assert isinstance(store, VersionedTaskStore)

        async def save(state: TaskState, version: TaskVersion) -> TaskVersion:
            task.status.state = state
            event = TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            return await store.save(
                task, event=event, prev=None, prev_version=version, context=ctx()
            )

        version = await save(TaskState.TASK_STATE_WORKING, TaskVersion.MISSING)
        tail = b.event_log.tail(task.id, 0)  # type: ignore[union-attr]
        _seq, _version, first = await anext(tail)
        assert first.status.state == TaskState.TASK_STATE_WORKING
        await save(TaskState.TASK_STATE_COMPLETED, version)  # the subscriber reads no more

        async def purged() -> bool:
            return await a.get_task(task.id, ctx()) is None

        await eventually(purged)
        # A hang guard: the tail either ends or, before, waited for ever.
        rest = await asyncio.wait_for(_drain(tail), timeout=30)
        assert all(e.status.state == TaskState.TASK_STATE_COMPLETED for e in rest)
    finally:
        await b.aclose()
        await a.aclose()


async def _drain(tail: Any) -> list[Any]:
    return [event async for _seq, _version, event in tail]


async def test_a_task_is_kept_a_retention_after_the_database_saw_it_finished(
    sql_url: str,
) -> None:
    """Retention judges by when the database first saw a task finished, not by its status
    timestamp (the clock of the replica that saved it). Before, a task whose timestamp
    was hours behind was deleted at the first pass, one hours ahead kept for hours."""
    noted = make_task(TaskState.TASK_STATE_COMPLETED, at=ago(3 * 3600))
    behind = make_task(TaskState.TASK_STATE_COMPLETED, at=ago(3 * 3600))
    ahead = make_task(TaskState.TASK_STATE_COMPLETED, at=datetime.now(UTC) + timedelta(hours=3))
    writer = open_stores(sql_url, settings())
    await writer.start()
    try:
        for task in (noted, behind, ahead):
            await put(writer, task)
        await noted_long_ago(writer, noted.id)
    finally:
        await writer.aclose()
    stores = open_stores(sql_url, settings(task_retention_seconds=4.0))  # purged every 1 s
    await stores.start()
    try:

        async def gone(task_id: str) -> bool:
            return await stores.get_task(task_id, ctx()) is None

        await eventually(lambda: gone(noted.id))  # the first pass: the others noted now
        assert await stores.get_task(behind.id, ctx()) is not None  # was: deleted too
        await eventually(lambda: gone(ahead.id))  # was: kept for 3 hours
        assert await gone(behind.id)
    finally:
        await stores.aclose()
