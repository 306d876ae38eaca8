"""Shared helpers for storage tests: call contexts, tasks, settings, a table's indexes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from apcore import Identity
from sqlalchemy import text

from apcore_a2a.execution.identity import Caller
from apcore_a2a.settings import Settings
from apcore_a2a.storage._urls import create_engine, parse_store_url

TERMINAL = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
)


def ctx(user: str | None = "alice") -> ServerCallContext:
    """A call context for *user* (``None``: anonymous), as our server builds it."""
    if user is None:
        return ServerCallContext()
    return ServerCallContext(user=Caller(Identity(id=user)))


def blocking(user: str = "alice", *, made_up: str | None = None) -> ServerCallContext:
    """*user*'s blocking ``SendMessage`` (its states may be kept), which made up the task
    id *made_up* if given."""
    from apcore_a2a.edge.call import record_of

    context = ctx(user)
    call = record_of(context)
    call.defer_writes, call.new_task = True, made_up
    return context


def settings(**overrides: Any) -> Settings:
    """Default settings plus *overrides*, ignoring the process environment."""
    return Settings.defaults().replace(**overrides)


def make_task(
    state: TaskState = TaskState.TASK_STATE_WORKING,
    *,
    task_id: str | None = None,
    context_id: str | None = None,
    at: datetime | None = None,
    text: str = "hello",
) -> Task:
    """A task with history, an artifact, metadata and a status timestamp."""
    task_id = task_id or str(uuid.uuid4())
    context_id = context_id or str(uuid.uuid4())
    status = TaskStatus(state=state)
    status.timestamp.FromDatetime(at or datetime.now(UTC))
    task = Task(
        id=task_id,
        context_id=context_id,
        status=status,
        history=[
            Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                task_id=task_id,
                context_id=context_id,
                parts=[Part(text=text)],
            )
        ],
        artifacts=[Artifact(artifact_id="a1", name="out", parts=[Part(text=text.upper())])],
    )
    task.metadata.update({"k": "v", "n": 3})
    return task


def ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


async def index_names(url: str, table: str = "tasks") -> set[str]:
    """The indexes of *table* (SQLAlchemy does not reflect SQLite's on expressions)."""
    store_url = parse_store_url(url)
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
        if store_url.kind == "sqlite"
        else "SELECT indexname FROM pg_indexes WHERE tablename = :table "
        "AND schemaname = current_schema()"
    )
    engine = create_engine(store_url)
    try:
        async with engine.connect() as conn:
            return {str(row[0]) for row in await conn.execute(text(query), {"table": table})}
    finally:
        await engine.dispose()
