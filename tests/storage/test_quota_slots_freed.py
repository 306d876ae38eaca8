"""Quota slots no process holds any more are freed at once, not when a caller hits its quota.

Cluster mode on PostgreSQL keeps per-caller quota slots in ``apcore_a2a_quota_slots``. A
replica that stops cleanly frees the slots it still leases (requests and streams, and
leases waiting for their caller's next request), but not a task's slot whose rename the
database dropped; recovery that fails a task left running frees the slot the task held for
its caller's unfinished-task quota.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator

import pytest
from a2a.types import TaskState
from sqlalchemy import insert, select, update

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage import open_stores
from apcore_a2a.storage.quota_slots import TASK_SCOPE, SqlQuotaSlots, slots_table
from apcore_a2a.storage.stores import Stores

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, kill_slot_renames
from ._helpers import make_task, settings
from .test_recovery import FAST, assert_interrupted, eventually, put, state_of

#: The caller of the quota tests that import it: one of this test process's own. A count of
#: a caller's rows also takes the earlier releases' key, one for the whole database
#: (``_slot_rows._EARLIER_KEY``), so another test process's count of the same caller, in
#: its own schema, held up this one's takes past their wait ("store unavailable").
CALLER = f"key:alice-{os.getpid()}"


async def _replica(pg_url: str) -> tuple[Stores, SqlQuotaSlots]:
    """A started cluster replica's stores on *pg_url*, and its quota slots."""
    stores = open_stores(pg_url, settings(cluster=True, **FAST))
    await stores.start()
    assert stores.quota_slots is not None
    return stores, stores.quota_slots


async def test_a_clean_stop_frees_the_slots_the_replica_leases(pg_url: str) -> None:
    a, slots_a = await _replica(pg_url)
    assert await slots_a.take("streams", CALLER, "open-stream", 3)
    assert await slots_a.take("streams", CALLER, "ended-stream", 3)
    await slots_a.give_back("streams", "ended-stream")  # leased for the caller's next one
    # A task's slot outlives the replica: the task is the caller's until it ends.
    assert await slots_a.take(TASK_SCOPE, CALLER, "request", 3)
    await slots_a.rename(TASK_SCOPE, "request", "task-1")
    await a.aclose()
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await b.start()
    try:
        assert b.quota_slots is not None
        assert await b.quota_slots.holders("streams", CALLER) == []
        assert await b.quota_slots.holders(TASK_SCOPE, CALLER) == ["task-1"]
    finally:
        await b.aclose()


async def test_a_clean_stop_keeps_the_slot_of_a_task_whose_rename_failed(pg_url: str) -> None:
    """The database drops the connection of the rename handing a request's slot to its
    task, then is back when the replica stops. Before, the stop freed the slot (still
    leased to the replica under the request's name): the task, still unfinished, counted
    for nothing."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots_a = await _replica(pg_url)
    assert await slots_a.take(TASK_SCOPE, CALLER, "request", 3)
    await kill_slot_renames(schema, TASK_SCOPE, True)
    with pytest.raises(StoreUnavailableError):
        await slots_a.rename(TASK_SCOPE, "request", "task-1")
    await kill_slot_renames(schema, TASK_SCOPE, False)
    await a.aclose()
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await b.start()
    try:
        assert b.quota_slots is not None
        assert await b.quota_slots.holders(TASK_SCOPE, CALLER) == ["task-1"]  # was: []
    finally:
        await b.aclose()


async def test_a_rename_failing_after_the_stop_starts_no_retry(pg_url: str) -> None:
    """A request still running when its replica stops renames its slot to its task, and
    the database drops it. Before, that started a retry every second that nothing
    cancelled (while the database refused, for ever); the slot is left to the rule of the
    dead replica's slots."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots_a = await _replica(pg_url)
    assert await slots_a.take(TASK_SCOPE, CALLER, "request", 3)
    await a.aclose()
    await kill_slot_renames(schema, TASK_SCOPE, True, rowless=True)
    try:
        with pytest.raises(StoreUnavailableError):
            await slots_a.rename(TASK_SCOPE, "request", "task-1")
        await asyncio.sleep(0.1)
        ours = [t for t in asyncio.all_tasks() if "SqlQuotaSlots" in repr(t.get_coro())]
        for task in ours:  # before the fix: the retry loop
            task.cancel()
        assert ours == []
    finally:
        await kill_slot_renames(schema, TASK_SCOPE, False, rowless=True)


async def test_a_dropped_rename_is_retried_once_the_database_is_back(pg_url: str) -> None:
    """The task of a rename the database dropped ends on another replica, which gives back
    the slot of the task's name. Before, the slot kept the request's name for the life of
    the replica that leased it: never renamed, never freed by the task's end."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    await b.start()
    try:
        assert a.quota_slots is not None and b.quota_slots is not None
        assert await a.quota_slots.take(TASK_SCOPE, CALLER, "request", 3)
        await kill_slot_renames(schema, TASK_SCOPE, True)
        with pytest.raises(StoreUnavailableError):
            await a.quota_slots.rename(TASK_SCOPE, "request", "task-1")
        await kill_slot_renames(schema, TASK_SCOPE, False)
        deadline = time.monotonic() + 60  # a hang guard
        while await b.quota_slots.holders(TASK_SCOPE, CALLER) != ["task-1"]:
            assert time.monotonic() < deadline, "the rename was never retried"
            await asyncio.sleep(0.05)
        await b.quota_slots.give_back(TASK_SCOPE, "task-1")  # the task ended on B
        assert await b.quota_slots.holders(TASK_SCOPE, CALLER) == []
    finally:
        await a.aclose()
        await b.aclose()


async def test_recovery_frees_the_slot_of_a_task_it_fails(pg_url: str) -> None:
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    running = make_task(TaskState.TASK_STATE_WORKING)
    parked = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
    slots_a = a.quota_slots
    assert slots_a is not None
    for task in (running, parked):
        await put(a, task)
        assert await slots_a.take(TASK_SCOPE, CALLER, f"request-{task.id}", 3)
        await slots_a.rename(TASK_SCOPE, f"request-{task.id}", task.id)
    await a.aclose()  # its running task is failed by the next replica to start
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await b.start()
    try:
        assert_interrupted(await state_of(b, running.id))
        assert b.quota_slots is not None
        # The parked task still waits for its caller: it keeps its slot.
        assert await b.quota_slots.holders(TASK_SCOPE, CALLER) == [parked.id]
    finally:
        await b.aclose()


async def test_a_lease_whose_free_failed_is_freed_once_the_caller_is_at_its_quota(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The database drops the connection of the delete freeing a stream's idle lease.
    Before, the row stayed leased to the replica, which no longer knew it, until the
    replica stopped: the caller was one slot short (refused at its quota, -32091)."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    try:
        slots = a.quota_slots
        assert slots is not None
        assert await slots.take("streams", CALLER, "ended-stream", 1)
        await kill_slot_renames(schema, "streams", True, deletes=True)
        await slots.give_back("streams", "ended-stream")  # freed after LEASE_SECONDS
        await eventually(lambda: "could not free 1 quota slots" in caplog.text)
        await kill_slot_renames(schema, "streams", False, deletes=True)
        assert await slots.take("streams", CALLER, "next-stream", 1)  # was: refused
        assert not await slots.take("streams", CALLER, "third-stream", 1)  # in use: kept
    finally:
        await a.aclose()


async def test_a_slot_whose_take_lost_its_answer_is_freed_and_no_other_replicas(
    pg_url: str,
) -> None:
    """A take whose insert committed but whose answer was lost (the connection cut after
    COMMIT) left a row leased to this replica that it never knew: inserted here by SQL.
    Only that row is freed: another live replica's slot stays."""
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    await b.start()
    try:
        assert a.quota_slots is not None and b.quota_slots is not None
        assert await b.quota_slots.take("streams", CALLER, "b-stream", 2)
        [b_row] = await b.quota_slots.holders("streams", CALLER)
        async with a.quota_slots.engine.begin() as conn:
            free = 1 - (await conn.execute(select(slots_table.c.slot))).scalar_one()
            await conn.execute(
                insert(slots_table).values(
                    scope="streams",
                    subject=CALLER,
                    slot=free,
                    holder="r:lost",
                    replica_id=a.quota_slots.registry.replica_id,
                )
            )
        assert await a.quota_slots.take("streams", CALLER, "a-stream", 2)  # was: refused
        holders = await a.quota_slots.holders("streams", CALLER)
        assert b_row in holders and "r:lost" not in holders
        assert not await a.quota_slots.take("streams", CALLER, "another", 2)
    finally:
        await a.aclose()
        await b.aclose()


def _retrying() -> bool:
    """Whether a retry of renames the database dropped is under way."""
    return any("_retry_renames" in repr(t.get_coro()) for t in asyncio.all_tasks())


async def _free_row(schema: str, holder: str) -> None:
    """Delete *holder*'s row behind the replica's back, as another replica frees a dead
    replica's slots (this one cut off from the database past the replica timeout)."""
    import asyncpg

    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        table = f"{schema}.apcore_a2a_quota_slots"
        assert await db.execute(f"DELETE FROM {table} WHERE holder = $1", holder) == "DELETE 1"
    finally:
        await db.close()


@contextlib.asynccontextmanager
async def rename_dropped(
    pg_url: str, slots: SqlQuotaSlots, task_id: str, limit: int
) -> AsyncIterator[str]:
    """*slots* takes one of :data:`CALLER`'s *limit* task slots for a request, and the
    database drops its rename to *task_id* (``StoreUnavailableError``; retried in the
    background once the block ends). Yields the request's row."""
    schema = pg_url.rsplit("schema=", 1)[1]
    assert await slots.take(TASK_SCOPE, CALLER, "request", limit)
    [row] = await slots.holders(TASK_SCOPE, CALLER)
    await kill_slot_renames(schema, TASK_SCOPE, True)
    try:
        with pytest.raises(StoreUnavailableError):
            await slots.rename(TASK_SCOPE, "request", task_id, limit)
        yield row
    finally:
        await kill_slot_renames(schema, TASK_SCOPE, False)


@pytest.mark.parametrize("full", [False, True], ids=["free-slot", "at-quota"])
async def test_a_retried_rename_whose_row_is_gone_takes_a_fresh_slot(
    pg_url: str, full: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The database drops a task's rename, and the request's row is freed meanwhile (its
    replica counted dead). Before, the retry updated no row and said nothing: the task,
    unfinished, counted for nothing. Now it takes a fresh slot; with the caller at its
    quota meanwhile (another request took the slot), one past the quota, and says so."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots_a = await _replica(pg_url)
    b, slots_b = await _replica(pg_url)
    try:
        async with rename_dropped(pg_url, slots_a, "task-1", 1) as row:
            await _free_row(schema, row)
            if full:
                assert await slots_b.take(TASK_SCOPE, CALLER, "b-request", 1)
        if full:
            await eventually(lambda: "task-1" in caplog.text)
            assert "counted past the quota" in caplog.text
            # Kept and counted: b-request's slot and task-1's, one past the quota
            # (tests/storage/test_rename_retry_ends.py).
            held = await slots_a.holders(TASK_SCOPE, CALLER)
            assert len(held) == 2 and "task-1" in held
        else:
            await eventually(lambda: not _retrying())
            assert await slots_a.holders(TASK_SCOPE, CALLER) == ["task-1"]  # was: []
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_retried_rename_the_database_took_before_takes_no_second_slot(
    pg_url: str,
) -> None:
    """A rename whose answer was lost after its commit is retried: the retry finds no row
    under the request's name, and the task's, which it must not count twice."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots = await _replica(pg_url)
    try:
        assert await slots.take(TASK_SCOPE, CALLER, "request", 3)
        [row] = await slots.holders(TASK_SCOPE, CALLER)
        await kill_slot_renames(schema, TASK_SCOPE, True)
        try:
            with pytest.raises(StoreUnavailableError):
                await slots.rename(TASK_SCOPE, "request", "task-1", 3)
        finally:
            await kill_slot_renames(schema, TASK_SCOPE, False)
        async with slots.engine.begin() as conn:  # the rename's commit, its answer lost
            await conn.execute(
                update(slots_table).where(slots_table.c.holder == row).values(holder="task-1")
            )
        await eventually(lambda: not _retrying())
        assert await slots.holders(TASK_SCOPE, CALLER) == ["task-1"]
    finally:
        await a.aclose()
