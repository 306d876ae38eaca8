"""Restart recovery reads the tasks left running, not the table (``storage/running.py``).

PostgreSQL: rows of ``tasks`` an agent reads to start and stop (``pg_stat_user_tables``,
``seq_tup_read + idx_tup_fetch``, counted once it has stopped), with 40,000 finished tasks
and five left running (two as an older agent wrote them): before the partial index each
start read every task (40,020 rows); now the five (20 rows), each failed as interrupted.
SQLite: the query plans of the recovery's reads name the index. Replicas of a release
with the index, starting together on a database an older one left with tasks, all start
and create it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._sql_backend import _orphaned
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.migrations import upgrade_database
from apcore_a2a.storage.running import INDEX_NAME, running_tasks

from ._helpers import index_names, settings
from .test_superseded_indexes import start_together
from .test_unrelated_rows_e2e import FEW, _server, _start_reads, database, mode  # noqa: F401
from .test_write_path_e2e import _sql

FINISHED = 40_000
_TASKS = (
    "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, history, "
    "protocol_version) SELECT '{prefix}-' || g, 'c-' || g, 'task', 'u-' || (g % 100), "
    "now() - g * interval '1 second', '{{\"state\": \"{state}\"}}', '[]', '1.0' "
    "FROM generate_series(1, {n}) g"
)
#: the tasks left running: 1.0 names, and an older agent's 0.3 ones
RUNNING = {"working-1": "TASK_STATE_WORKING", "working-2": "TASK_STATE_WORKING"}
RUNNING |= {"submitted-1": "TASK_STATE_SUBMITTED", "old-1": "working", "old-2": "submitted"}


def _left_running() -> str:
    rows = ", ".join(
        f"('{task_id}', 'c', 'task', 'u-1', now(), '{{\"state\": \"{state}\"}}', '[]', "
        f"'{'1.0' if state.startswith('TASK_') else '0.3'}')"
        for task_id, state in RUNNING.items()
    )
    return (
        "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, history, "
        f"protocol_version) VALUES {rows}"
    )


async def _states(url: str) -> dict[str, str]:
    ids = ", ".join(f"'{task_id}'" for task_id in RUNNING)
    rows = await _sql(url, f"SELECT id, status ->> 'state' FROM tasks WHERE id IN ({ids})")
    return {str(task_id): str(state) for task_id, state in rows}


async def test_a_start_reads_the_tasks_left_running_not_the_table(
    database: tuple[str, str],  # noqa: F811
    mode: str,  # noqa: F811
) -> None:
    url, name = database
    with _server(url, mode):  # the tables and indexes
        pass
    done = _TASKS.format(prefix="done", state="TASK_STATE_COMPLETED", n=FINISHED)
    await _sql(url, done, _left_running())
    await _sql(url, "ANALYZE tasks")
    read = await _start_reads(url, mode, name, "tasks")
    assert await _states(url) == dict.fromkeys(RUNNING, "TASK_STATE_FAILED")
    assert read <= FEW, f"a start read {read} rows of tasks"


async def test_recovery_reads_the_index_on_sqlite(sqlite_url: str) -> None:
    for cluster in (False, True):
        stores = open_stores(sqlite_url, settings(cluster=cluster))
        await stores.start()
        await stores.aclose()
    running = running_tasks("sqlite")
    engine = create_engine(parse_store_url(sqlite_url))
    try:
        async with engine.connect() as conn:
            for stmt in (running, _orphaned(running, datetime.now(UTC))):
                sql = str(stmt.compile(conn.sync_engine, compile_kwargs={"literal_binds": True}))
                plan = [row[-1] for row in await conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"))]
                on_tasks = [step for step in plan if " tasks " in f"{step} "]
                assert on_tasks and all(INDEX_NAME in step for step in on_tasks), plan
    finally:
        await engine.dispose()


@pytest.mark.postgres
async def test_replicas_starting_together_on_an_older_database_create_the_index(
    pg_url: str,
) -> None:
    # As an older release left it: its tables, tasks of every kind, no index of running ones.
    stores = open_stores(pg_url, settings(cluster=True))
    await stores.start()
    await stores.aclose()
    await _sql(pg_url, f"DROP INDEX {INDEX_NAME}")
    done = _TASKS.format(prefix="done", state="TASK_STATE_COMPLETED", n=2000)
    await _sql(pg_url, done, _left_running())
    await start_together(pg_url)
    assert INDEX_NAME in await index_names(pg_url)
    assert await _states(pg_url) == dict.fromkeys(RUNNING, "TASK_STATE_FAILED")


async def test_db_upgrade_creates_the_index_on_an_older_database(sql_url: str) -> None:
    engine = create_engine(parse_store_url(sql_url))
    try:
        await DatabaseTaskStore(engine).initialize()  # as an older release left it
    finally:
        await engine.dispose()
    assert INDEX_NAME not in await index_names(sql_url)
    await upgrade_database(sql_url)
    assert INDEX_NAME in await index_names(sql_url)
