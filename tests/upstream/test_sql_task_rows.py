"""Our statements on the SDK's tables against the SDK's models and migrations.

The group-commit writers write the SDK's ``tasks``, ``task_versions`` and ``task_events``
rows themselves (``storage/_pg_writer.SDK_COLUMNS``: the columns, types and constraints
they write for). Each test here fails the day the a2a-sdk changes one of them: a column
added, dropped, retyped, made required, or a row converted differently.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.server.cluster import TaskVersion, VersionedDatabaseTaskStore
from a2a.server.models import Base
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Artifact, Part, Task, TaskState, TaskStatusUpdateEvent
from sqlalchemy import Column, inspect, select, text
from sqlalchemy.dialects import postgresql

from apcore_a2a.storage._pg_writer import SDK_COLUMNS
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.migrations import upgrade_database
from apcore_a2a.upstream.sql_task_rows import TaskRows, version_number
from tests._postgres import pg_schema_url
from tests.storage._helpers import ctx, make_task

_PG = postgresql.dialect()  # type: ignore[no-untyped-call]

#: ``tasks`` as the first a2a-sdk releases created it, before any migration
_LEGACY_TASKS = (
    "CREATE TABLE tasks (id VARCHAR(36) PRIMARY KEY, context_id VARCHAR(36) NOT NULL, "
    "kind VARCHAR(16) NOT NULL, status JSON NOT NULL, artifacts JSON, history JSON, "
    "metadata JSON)"
)


def _describe(type_: Any, nullable: bool, primary_key: bool) -> str:
    described = type_.compile(dialect=_PG)
    if primary_key:
        return f"{described} PRIMARY KEY"
    return described if nullable else f"{described} NOT NULL"


def _generated(column: Column[Any]) -> bool:
    """A column the database fills (the event log's sequence): we never write it."""
    return bool(column.primary_key and column.autoincrement is True)


def test_the_columns_we_write_are_the_sdk_models() -> None:
    for name, written in SDK_COLUMNS.items():
        table = Base.metadata.tables[name]
        model = {
            c.name: _describe(c.type, bool(c.nullable), c.primary_key)
            for c in table.columns
            if not _generated(c)
        }
        assert model == written, f"a2a-sdk's {name} model differs from what we write"


@pytest.mark.postgres
@pytest.mark.parametrize("start", ["empty", "legacy"])
async def test_the_columns_we_write_are_what_the_sdk_migrations_make(start: str) -> None:
    async with pg_schema_url() as url:
        engine = create_engine(parse_store_url(url))
        try:
            if start == "legacy":
                async with engine.begin() as conn:
                    await conn.execute(text(_LEGACY_TASKS))
            await upgrade_database(url)
            async with engine.connect() as conn:
                made = await conn.run_sync(_reflect)
        finally:
            await engine.dispose()
    for name, written in SDK_COLUMNS.items():
        assert {c: made[name][c] for c in written} == written, f"migrated {name} differs"
        assert set(made[name]) - set(written) <= {"seq"}, f"migrated {name} has new columns"


def _reflect(sync_conn: Any) -> dict[str, dict[str, str]]:
    inspector = inspect(sync_conn)
    tables = {}
    for name in SDK_COLUMNS:
        keys = set(inspector.get_pk_constraint(name)["constrained_columns"])
        tables[name] = {
            c["name"]: _describe(c["type"], c["nullable"], c["name"] in keys)
            for c in inspector.get_columns(name)
        }
    return tables


@pytest.fixture
async def versioned() -> AsyncIterator[VersionedDatabaseTaskStore]:
    async with pg_schema_url() as url:
        store = VersionedDatabaseTaskStore(create_engine(parse_store_url(url)))
        await store.initialize()
        yield store
        await store.as_task_store.engine.dispose()  # type: ignore[attr-defined]


async def _saved_task(versioned: VersionedDatabaseTaskStore) -> tuple[DatabaseTaskStore, Task]:
    """The SDK's own store behind *versioned*, and a task it saved for ``alice``."""
    db = versioned.as_task_store
    assert isinstance(db, DatabaseTaskStore)
    task = make_task(TaskState.TASK_STATE_COMPLETED)
    task.artifacts.append(Artifact(artifact_id="a-1", parts=[Part(text="done")]))
    task.metadata.update({"k": "v"})
    await db.save(task, ctx("alice"))
    return db, task


@pytest.mark.postgres
async def test_our_rows_are_what_the_sdk_store_writes(
    versioned: VersionedDatabaseTaskStore,
) -> None:
    db, task = await _saved_task(versioned)
    rows = TaskRows(db)
    async with db.engine.connect() as conn:
        stored = (await conn.execute(select(rows.table))).mappings().one()
    ours = rows.row(task, "alice")
    assert set(ours) == set(SDK_COLUMNS["tasks"])
    assert json.loads(json.dumps(ours, default=str)) == json.loads(
        json.dumps(dict(stored), default=str)
    )


@pytest.mark.postgres
async def test_a_task_of_a_row_is_what_the_sdk_store_reads(
    versioned: VersionedDatabaseTaskStore,
) -> None:
    db, task = await _saved_task(versioned)
    async with db.async_session_maker() as session:
        model = (await session.execute(select(db.task_model))).scalars().one()
    assert TaskRows(db).task(model) == await db.get(task.id, ctx("alice")) == task


@pytest.mark.postgres
async def test_a_task_version_is_the_event_logs_number(
    versioned: VersionedDatabaseTaskStore,
) -> None:
    # Still no public accessor: once there is one, use it instead of the seam.
    assert sorted(n for n in dir(TaskVersion) if not n.startswith("_")) == [
        "MISSING",
        "is_after",
        "is_missing",
    ]
    assert version_number(TaskVersion.MISSING) == 0
    task = make_task(TaskState.TASK_STATE_WORKING)
    event = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)
    first = await versioned.save(task, event=event, prev_version=TaskVersion.MISSING, context=ctx())
    second = await versioned.save(task, event=event, prev_version=first, context=ctx())
    db = versioned.as_task_store
    assert isinstance(db, DatabaseTaskStore)
    async with db.engine.connect() as conn:
        logged = (
            (await conn.execute(text("SELECT task_version FROM task_events ORDER BY seq")))
            .scalars()
            .all()
        )
    assert [version_number(first), version_number(second)] == list(logged) == [1, 2]
