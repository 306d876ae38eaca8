"""Retention of finished tasks, judged by the database's clock (``docs/storage.md``,
*Retention for SQL stores*).

A task's ``last_updated`` is its status timestamp, written by the clock of the replica that
saved it: a replica running more than the retention behind had its finished tasks deleted
at once, one running ahead had them kept too long. So a finished task is noted in our own
table with the database's now, and a pass deletes the tasks noted more than the retention
ago (oldest first, in batches: it reads the notes due). A task is noted when it is saved
finished (:class:`FinishedNotes`); a sweep of every task, once per retention, notes those
whose note was lost (an outage, a replica killed at that moment) and those finished
before notes existed (their status timestamp cannot tell an old task from a replica's slow
clock). A finished task never changes again, so its note stays true.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from typing import Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.models import TaskModel
from a2a.types import Task, TaskState
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


logger = logging.getLogger(__name__)


async def note(engine: AsyncEngine, ids: Iterable[str] | None = None) -> None:
    """Note, with the database's now, the finished tasks among *ids* (``None``: every
    task, a sweep) that are not noted yet."""
    unseen = ~exists().where(_F.task_id == TaskModel.id)
    finished = select(TaskModel.id, db_seconds(engine)).where(STATE.in_(FINISHED_NAMES), unseen)
    if ids is not None:
        finished = finished.where(TaskModel.id.in_(list(ids)))
    noted = upsert_of(engine)(finished_table).from_select(["task_id", "noted_at"], finished)
    async with engine.begin() as conn:
        await conn.execute(noted.on_conflict_do_nothing())


async def purge(
    engine: AsyncEngine, seconds: float, dependents: list[Any], cleanup: Any = None
) -> int:
    """Delete the tasks noted more than *seconds* ago, oldest first, with the rows of
    *dependents* (tables keyed by ``task_id``); *cleanup*, given a connection and the ids,
    deletes more in the same transaction. The number deleted."""
    # A value, not the (volatile) clock in the query: the index on the notes finds those due.
    async with engine.connect() as conn:
        cutoff: float = (await conn.execute(select(db_seconds(engine) - seconds))).scalar_one()
    due = select(_F.task_id).where(_F.noted_at < cutoff).order_by(_F.noted_at).limit(BATCH)
    # Looked up by id, not joined: a join's plan may read every task for a few due.
    unfinished = or_(STATE.is_(None), STATE.not_in(FINISHED_NAMES))
    deleted = 0
    while True:
        async with engine.begin() as conn:
            noted = [row[0] for row in await conn.execute(due)]
            if not noted:
                return deleted
            # Never a task that is not finished: its note (not ours) goes alone.
            found = select(TaskModel.id).where(TaskModel.id.in_(noted), unfinished)
            kept = {row[0] for row in await conn.execute(found)}
            ids = [task_id for task_id in noted if task_id not in kept]
            for table in dependents:
                await conn.execute(delete(table).where(table.c.task_id.in_(ids)))
            if cleanup is not None:
                await cleanup(conn, ids)
            await conn.execute(delete(TaskModel).where(TaskModel.id.in_(ids)))
            await conn.execute(delete(finished_table).where(_F.task_id.in_(noted)))
        deleted += len(ids)


class FinishedNotes:
    """A save listener noting each task saved finished at once, in batches (a note lost
    to an outage is the next sweep's)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._ids: set[str] = set()
        self._writer: asyncio.Task[None] | None = None

    def saved(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Note *task* if it is finished."""
        if task.status.state not in TERMINAL_TASK_STATES:
            return
        self._ids.add(task.id)
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())

    async def interrupted(self, task: Task, event: Any) -> None:
        """Note a task that orphan recovery failed."""
        self.saved(task)

    async def _write(self) -> None:
        try:
            while self._ids:
                ids = list(itertools.islice(self._ids, BATCH))
                self._ids.difference_update(ids)
                try:
                    await note(self._engine, ids)
                except Exception as exc:
                    logger.info(
                        "%d finished task(s) left to the sweep: %s", len(ids), type(exc).__name__
                    )
        finally:
            self._writer = None

    async def aclose(self) -> None:
        """Wait for the notes under way."""
        if self._writer is not None:
            await asyncio.wait({self._writer})
