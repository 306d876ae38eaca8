"""Which tasks restart recovery looks at: those left ``submitted`` or ``working``, read
through a partial index of those tasks alone (``docs/storage.md``, *Restarts*).

Every start (each worker, each replica) and each dead replica's recovery asks for them;
filtered on the stored state, which no index held, each read every task of the table
(40,001 rows at 40,000 tasks). ``ix_apcore_a2a_tasks_running`` holds the ids of the tasks
in a running state, so the read follows them, not the table. The queries spell the
index's predicate as literals (a parameter proves nothing about a partial index: neither
PostgreSQL's generic plans nor SQLite can use it then).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.server.models import TaskModel
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from ._urls import create_index

INDEX_NAME = "ix_apcore_a2a_tasks_running"
RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
#: stored state strings: 1.0 enum names, and the 0.3 ones of rows older SDKs wrote
_NAMES = [TaskState.Name(s) for s in RUNNING] + ["submitted", "working"]
_LIST = ", ".join(f"'{name}'" for name in _NAMES)
#: the predicate per dialect, as the database keeps it (PostgreSQL's an ``= ANY`` array)
_PREDICATE = {
    "postgresql": f"(status ->> 'state') = ANY (ARRAY[{_LIST}])",
    "sqlite": f"json_extract(status, '$.state') IN ({_LIST})",
}


def running_tasks(dialect: str) -> Any:
    """``(task_id, owner)`` of the tasks in a running state, in *dialect*."""
    # text, not a boolean column: SQLite would compare that with 1, which no index implies
    return select(TaskModel.id, TaskModel.owner).where(text(_PREDICATE[dialect]))


async def create_running_index(engine: AsyncEngine) -> None:
    """Create :data:`INDEX_NAME` unless it exists."""
    where = _PREDICATE[engine.dialect.name]
    await create_index(engine, INDEX_NAME, TaskModel.__tablename__, "id", where=where)


def mark_failed(task: Task, text: str) -> TaskStatus:
    """Fail *task* (a running one nothing runs any more) in place with *text* for its
    status message, the replaced status message moved into its history as the SDK's
    TaskManager does; returns the new status."""
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    status = TaskStatus(
        state=TaskState.TASK_STATE_FAILED,
        message=Message(
            role=Role.ROLE_AGENT,
            message_id=str(uuid.uuid4()),
            task_id=task.id,
            context_id=task.context_id,
            parts=[Part(text=text)],
        ),
    )
    status.timestamp.FromDatetime(datetime.now(UTC))
    task.status.CopyFrom(status)
    return status
