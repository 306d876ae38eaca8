"""Periodic deletion of finished tasks older than the retention period (SQL stores)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _FINISHED
from a2a.server.models import (
    PushNotificationConfigModel,
    TaskEventModel,
    TaskModel,
    TaskVersionModel,
)
from a2a.types import TaskState
from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ._tables import claims_table, turns_table
from .quota_slots import PUSH_SCOPE, slots_table

__all__ = ["purge_finished_tasks", "retention_interval"]

_FINISHED_NAMES = [TaskState.Name(s) for s in _FINISHED] + [
    "completed",
    "failed",
    "canceled",
    "rejected",
]
_BATCH = 500


def retention_interval(retention_seconds: float) -> float:
    """How often to purge: often enough to stay near the target, at most every 5 min."""
    return min(max(retention_seconds / 4, 0.5), 300.0)


async def purge_finished_tasks(
    engine: AsyncEngine, retention_seconds: float, *, cluster: bool
) -> int:
    """Delete finished tasks whose last status is older than *retention_seconds*.

    Their push configs go too, and in cluster mode their version rows, event log,
    claims and push-config quota slots. Returns the number of tasks deleted.
    """
    # The SDK stores ``last_updated`` as naive UTC (the status timestamp).
    cutoff = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=retention_seconds)
    dependents: list[Any] = [PushNotificationConfigModel.__table__]
    if cluster:
        dependents += [
            TaskVersionModel.__table__,
            TaskEventModel.__table__,
            claims_table,
            turns_table,
        ]
    total = 0
    while True:
        async with engine.begin() as conn:
            ids = [
                row[0]
                for row in await conn.execute(
                    select(TaskModel.id)
                    .where(
                        TaskModel.last_updated < cutoff,
                        TaskModel.status["state"].as_string().in_(_FINISHED_NAMES),
                    )
                    .limit(_BATCH)
                )
            ]
            if not ids:
                return total
            for table in dependents:
                await conn.execute(delete(table).where(table.c.task_id.in_(ids)))
            if cluster:
                slots = slots_table.c
                await conn.execute(
                    delete(slots_table).where(slots.scope == PUSH_SCOPE, slots.subject.in_(ids))
                )
            await conn.execute(delete(TaskModel).where(TaskModel.id.in_(ids)))
        total += len(ids)
