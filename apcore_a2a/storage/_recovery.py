"""Fail tasks that a dead process left ``submitted``/``working``.

Nobody will ever finish such a task, and clients polling it would wait forever; moving
it to ``failed`` with a status message tells them what happened.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.auth.user import User
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    LegacyTaskStoreAdapter,
    VersionedDatabaseTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.models import TaskModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ._engine import READ_ONLY
from ._tables import claims_table, replicas_table

__all__ = [
    "INTERRUPTED_MESSAGE",
    "canceled_among",
    "fail_tasks",
    "orphaned_running_tasks",
    "running_tasks",
    "running_tasks_of",
]

logger = logging.getLogger(__name__)

INTERRUPTED_MESSAGE = "Interrupted by server restart"

_RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
# Stored state strings: 1.0 enum names, plus the v0.3 spellings of rows written by
# older SDKs, which the SDK still reads.
_RUNNING_NAMES = [TaskState.Name(s) for s in _RUNNING] + ["submitted", "working"]

_CANCELED_NAMES = [TaskState.Name(TaskState.TASK_STATE_CANCELED), "canceled"]

_Row = tuple[str, str | None]


def _state_column() -> Any:
    return TaskModel.status["state"].as_string()


async def running_tasks(engine: AsyncEngine) -> list[_Row]:
    """All ``(task_id, owner)`` pairs in a running state."""
    stmt = select(TaskModel.id, TaskModel.owner).where(_state_column().in_(_RUNNING_NAMES))
    return await _fetch(engine, stmt)


async def orphaned_running_tasks(engine: AsyncEngine, live_cutoff: float) -> list[_Row]:
    """Running tasks whose claim is missing or names a replica without a recent heartbeat."""
    live = select(replicas_table.c.replica_id).where(replicas_table.c.heartbeat_at >= live_cutoff)
    stmt = (
        select(TaskModel.id, TaskModel.owner)
        .select_from(TaskModel)
        .outerjoin(claims_table, claims_table.c.task_id == TaskModel.id)
        .where(
            and_(
                _state_column().in_(_RUNNING_NAMES),
                or_(
                    claims_table.c.replica_id.is_(None),
                    claims_table.c.replica_id.not_in(live.scalar_subquery()),
                ),
            )
        )
    )
    return await _fetch(engine, stmt)


async def running_tasks_of(engine: AsyncEngine, replica_id: str) -> list[_Row]:
    """Running tasks claimed by one (dead) replica."""
    stmt = (
        select(TaskModel.id, TaskModel.owner)
        .select_from(TaskModel)
        .join(claims_table, claims_table.c.task_id == TaskModel.id)
        .where(and_(_state_column().in_(_RUNNING_NAMES), claims_table.c.replica_id == replica_id))
    )
    return await _fetch(engine, stmt)


async def canceled_among(engine: AsyncEngine, task_ids: list[str]) -> set[str]:
    """Which of *task_ids* the store holds as ``canceled`` (one query per 500 ids)."""
    found: set[str] = set()
    for start in range(0, len(task_ids), 500):
        chunk = task_ids[start : start + 500]
        stmt = select(TaskModel.id, TaskModel.owner).where(
            and_(TaskModel.id.in_(chunk), _state_column().in_(_CANCELED_NAMES))
        )
        found.update(task_id for task_id, _ in await _fetch(engine, stmt))
    return found


async def _fetch(engine: AsyncEngine, stmt: Any) -> list[_Row]:
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{READ_ONLY: True})
        return [(row[0], row[1]) for row in await conn.execute(stmt)]


class _Owner(User):
    """A stand-in user so the SDK's owner-scoped store methods address *owner*'s bucket."""

    def __init__(self, owner: str) -> None:
        self._owner = owner

    @property
    def is_authenticated(self) -> bool:
        return bool(self._owner)

    @property
    def user_name(self) -> str:
        return self._owner


def _mark_failed(task: Task) -> None:
    # Like the SDK's TaskManager: a replaced status message moves into history.
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    status = TaskStatus(
        state=TaskState.TASK_STATE_FAILED,
        message=Message(
            role=Role.ROLE_AGENT,
            message_id=str(uuid.uuid4()),
            task_id=task.id,
            context_id=task.context_id,
            parts=[Part(text=INTERRUPTED_MESSAGE)],
        ),
    )
    status.timestamp.FromDatetime(datetime.now(UTC))
    task.status.CopyFrom(status)


async def fail_tasks(
    rows: list[_Row], store: DatabaseTaskStore | VersionedDatabaseTaskStore
) -> int:
    """Move each still-running task to ``failed``; returns how many were changed.

    With a versioned (cluster) store the write is a compare-and-swap that also appends a
    status event, so subscribers on other replicas see the failure; a task another
    replica advanced meanwhile is left alone.
    """
    versioned = (
        store if isinstance(store, VersionedDatabaseTaskStore) else LegacyTaskStoreAdapter(store)
    )
    changed = 0
    for task_id, owner in rows:
        context = ServerCallContext(user=_Owner(owner or ""))
        try:
            stored = await versioned.get(task_id, context)
            if stored is None or stored.task.status.state not in _RUNNING:
                continue
            task = Task()
            task.CopyFrom(stored.task)
            _mark_failed(task)
            event = TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            await versioned.save(
                task, event=event, prev=stored.task, prev_version=stored.version, context=context
            )
            changed += 1
        except ConcurrentTaskModificationError:
            logger.debug("task %s changed while being marked interrupted; left as is", task_id)
    if changed:
        logger.warning("marked %d interrupted task(s) as failed: %s", changed, INTERRUPTED_MESSAGE)
    return changed
