"""Retention of finished tasks, judged by the database's clock (``docs/storage.md``,
*Retention for SQL stores*).

A task's ``last_updated`` is its status timestamp, written by the clock of the replica that
saved it: a replica running more than the retention behind had its finished tasks deleted
at once, one running ahead had them kept too long. So each pass first notes, in our own
table, the finished tasks it has not seen yet with the database's now, and deletes the
tasks noted more than the retention ago. A finished task never changes again, so its
note stays true; a task finished before notes existed is noted at the first pass, like
any other (its status timestamp cannot tell an old task from a replica's slow clock).
"""

from __future__ import annotations

from typing import Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.models import TaskModel
from a2a.types import TaskState
from sqlalchemy import Column, Float, Index, String, Table, delete, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ._replicas import METADATA, db_seconds, upsert_of

#: When a pass first saw each finished task, in seconds by the database's clock.
finished_table = Table(
    "apcore_a2a_finished_tasks",
    METADATA,
    Column("task_id", String(255), primary_key=True),
    Column("noted_at", Float, nullable=False),
    Index("ix_apcore_a2a_finished_tasks_noted_at", "noted_at"),
)
_F = finished_table.c
#: a task row's stored state (a string)
STATE = TaskModel.status["state"].as_string()
# Stored state strings: 1.0 enum names, plus the v0.3 spellings of rows written by
# older SDKs, which the SDK still reads.
FINISHED_NAMES = [TaskState.Name(s) for s in TERMINAL_TASK_STATES] + [
    *("completed", "failed", "canceled", "rejected")
]
#: rows deleted per transaction
BATCH = 500


async def purge(
    engine: AsyncEngine, seconds: float, dependents: list[Any], cleanup: Any = None
) -> int:
    """Note the finished tasks not noted yet, then delete those noted more than *seconds*
    ago with the rows of *dependents* (tables keyed by ``task_id``); *cleanup*, given a
    connection and the ids, deletes more in the same transaction. The number deleted."""
    unseen = ~exists().where(_F.task_id == TaskModel.id)
    finished = select(TaskModel.id, db_seconds(engine)).where(STATE.in_(FINISHED_NAMES), unseen)
    note = upsert_of(engine)(finished_table).from_select(["task_id", "noted_at"], finished)
    async with engine.begin() as conn:
        await conn.execute(note.on_conflict_do_nothing())
    # Never a task that is not finished (a note of a gone task goes alone).
    still = or_(TaskModel.id.is_(None), STATE.in_(FINISHED_NAMES))
    due = select(_F.task_id).outerjoin(TaskModel, TaskModel.id == _F.task_id)
    due = due.where(_F.noted_at < db_seconds(engine) - seconds, still).limit(BATCH)
    deleted = 0
    while True:
        async with engine.begin() as conn:
            ids = [row[0] for row in await conn.execute(due)]
            if not ids:
                return deleted
            for table in dependents:
                await conn.execute(delete(table).where(table.c.task_id.in_(ids)))
            if cleanup is not None:
                await cleanup(conn, ids)
            await conn.execute(delete(TaskModel).where(TaskModel.id.in_(ids)))
            await conn.execute(delete(finished_table).where(_F.task_id.in_(ids)))
        deleted += len(ids)
