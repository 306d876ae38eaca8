"""Store liveness: ping fails while the database is unreachable and recovers by itself."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from a2a.types import TaskState
from sqlalchemy import text

from apcore_a2a.storage import StoreUnavailableError, open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url

from .._postgres import PG_HOST, PG_PORT, PG_USER, require_postgres
from .._proxy import TcpProxy
from .._support import free_port
from ._helpers import ctx, make_task, settings
from .test_recovery import put


async def test_postgres_outage_and_recovery_without_restart(pg_url: str) -> None:
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    url = pg_url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
    stores = open_stores(url, settings())
    try:
        await stores.start()
        await stores.ping()
        task = make_task(TaskState.TASK_STATE_COMPLETED)
        await put(stores, task)

        await proxy.stop()
        with pytest.raises(StoreUnavailableError, match="unreachable"):
            await stores.ping()

        await proxy.start()
        await stores.ping()
        assert await stores.get_task(task.id, ctx()) == task
    finally:
        await stores.aclose()
        await proxy.stop()


async def test_unreachable_postgres_at_start_names_the_store_without_its_password() -> None:
    port = free_port()
    stores = open_stores(f"postgresql://app:hunter2@127.0.0.1:{port}/tasks", settings())
    try:
        with pytest.raises(StoreUnavailableError) as info:
            await stores.start()
        message = str(info.value)
        assert "hunter2" not in message
        assert f"127.0.0.1:{port}/tasks" in message
        with pytest.raises(StoreUnavailableError):
            await stores.ping()
    finally:
        await stores.aclose()


async def test_sqlite_in_a_missing_directory_is_reported(tmp_path: object) -> None:
    stores = open_stores("sqlite:////nonexistent-apcore-a2a-dir/tasks.db", settings())
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        await stores.start()
    await stores.aclose()


async def test_memory_store_is_always_healthy() -> None:
    stores = open_stores("memory://", settings(task_max_capacity=2))
    assert await stores.ping() is None  # nothing to reach, even before start
    await stores.start()
    for _ in range(3):  # one more than it holds: the oldest is evicted, not an error
        await stores.task_store.save(make_task(TaskState.TASK_STATE_COMPLETED), ctx())  # type: ignore[call-arg]
    assert await stores.ping() is None
    await stores.aclose()
    assert await stores.ping() is None


def _write_lock_is_taken(path: str) -> bool:
    """Whether another connection is refused the SQLite write lock right now."""
    probe = sqlite3.connect(path, timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc)
    else:
        probe.rollback()
        return False
    finally:
        probe.close()


async def test_sqlite_ping_does_not_wait_for_a_writer_holding_the_lock(sqlite_url: str) -> None:
    stores = open_stores(sqlite_url, settings())
    await stores.start()
    path = sqlite_url.removeprefix("sqlite:///")
    writer = create_engine(parse_store_url(sqlite_url))
    try:
        async with writer.begin() as conn:  # BEGIN IMMEDIATE: holds the write lock
            await conn.execute(text("DELETE FROM tasks WHERE id = 'none'"))
            assert await asyncio.to_thread(_write_lock_is_taken, path)
            # Queued behind the lock this would exceed the 3 s ping limit and fail; it
            # answers while the writer still holds the lock.
            assert await stores.ping() is None
            assert await asyncio.to_thread(_write_lock_is_taken, path)
        assert not await asyncio.to_thread(_write_lock_is_taken, path)
    finally:
        await writer.dispose()
        await stores.aclose()


async def test_missing_postgres_database_is_reported_as_unavailable() -> None:
    require_postgres()
    stores = open_stores(
        f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/apcore_a2a_no_such_db", settings()
    )
    try:
        with pytest.raises(StoreUnavailableError, match="apcore_a2a_no_such_db"):
            await stores.start()
    finally:
        await stores.aclose()
