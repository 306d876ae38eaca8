"""A rename the database dropped, retried in the background once it is back (cluster
mode on PostgreSQL, two replicas): what the retry does when no request is left to
answer.

- The caller is at its quota by then (the request's row was freed as a dead replica's
  while this one was cut off, and another request took the slot): the task is kept and
  counted past the quota, so the caller's next new task waits for it to end. Before, the
  retry logged a WARNING and the task counted for nothing: the caller ran one task more
  than its quota for the task's life.
- The task ended before the retry ran (on another replica, whose give-back found no row
  under the task's name yet): the retry frees the slot. Before, it renamed the row to the
  finished task, or took a fresh slot for it, and the slot stayed taken until the caller
  reached its quota and a recheck read the task.
"""

from __future__ import annotations

import pytest
from a2a.types import TaskState

from apcore_a2a.storage.quota_slots import TASK_SCOPE

from ._helpers import make_task
from .test_quota_slots_freed import CALLER, _free_row, _replica, _retrying, rename_dropped
from .test_recovery import eventually, put

pytest.importorskip("asyncpg")


async def test_a_retry_at_quota_keeps_the_task_counted(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots_a = await _replica(pg_url)
    b, slots_b = await _replica(pg_url)
    try:
        async with rename_dropped(pg_url, slots_a, "task-1", 1) as row:
            await _free_row(schema, row)  # A counted dead meanwhile
            assert await slots_b.take(TASK_SCOPE, CALLER, "b-request", 1)
        assert await slots_b.rename(TASK_SCOPE, "b-request", "task-2", 1)
        await eventually(lambda: not _retrying())
        assert sorted(await slots_a.holders(TASK_SCOPE, CALLER)) == ["task-1", "task-2"]
        await slots_b.give_back(TASK_SCOPE, "task-2")  # B's task ends; task-1 runs on
        assert not await slots_b.take(TASK_SCOPE, CALLER, "third", 1)  # was: served
        await slots_b.give_back(TASK_SCOPE, "task-1")  # it ends: the caller is served
        assert await slots_b.take(TASK_SCOPE, CALLER, "fourth", 1)
        assert "task-1" in caplog.text and "counted past" in caplog.text
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.parametrize("freed", [False, True], ids=["row-kept", "row-freed"])
async def test_a_retry_for_a_task_that_ended_meanwhile_frees_its_slot(
    pg_url: str, freed: bool
) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots_a = await _replica(pg_url)
    b, slots_b = await _replica(pg_url)
    try:
        task = make_task(TaskState.TASK_STATE_WORKING)
        await put(a, task)
        async with rename_dropped(pg_url, slots_a, task.id, 2) as row:
            if freed:
                await _free_row(schema, row)
            # The task ends on B, whose give-back finds no row of the task's name yet.
            task.status.state = TaskState.TASK_STATE_COMPLETED
            await put(b, task)
            await slots_b.give_back(TASK_SCOPE, task.id)
        await eventually(lambda: not _retrying())
        assert await slots_a.holders(TASK_SCOPE, CALLER) == []  # was: [task.id]
        # Both of the caller's slots are free (none leaked, none taken for the ended task).
        assert await slots_b.take(TASK_SCOPE, CALLER, "one", 2)
        assert await slots_b.take(TASK_SCOPE, CALLER, "two", 2)
    finally:
        await a.aclose()
        await b.aclose()
