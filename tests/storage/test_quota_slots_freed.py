"""Quota slots no process holds any more are freed at once, not when a caller hits its quota.

Cluster mode on PostgreSQL keeps per-caller quota slots in ``apcore_a2a_quota_slots``. A
replica that stops cleanly frees the slots it still leases (requests and streams, and
leases waiting for their caller's next request), but not a task's slot whose rename the
database dropped; recovery that fails a task left running frees the slot the task held for
its caller's unfinished-task quota.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from a2a.types import TaskState

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage import open_stores
from apcore_a2a.storage.quota_slots import TASK_SCOPE

from .._postgres import kill_slot_renames
from ._helpers import make_task, settings
from .test_recovery import FAST, assert_interrupted, put, state_of

CALLER = "key:alice"


async def test_a_clean_stop_frees_the_slots_the_replica_leases(pg_url: str) -> None:
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    slots_a = a.quota_slots
    assert slots_a is not None
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
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    slots_a = a.quota_slots
    assert slots_a is not None
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
