"""What retention costs follows the work due (PostgreSQL, a database of the test's own;
rows read as the database counts them: ``pg_stat_user_tables``).

Before: every pass first looked for finished tasks not noted yet among all the tasks of
the store (and read every note for the due ones): with a retention of days, a pass every
5 minutes read the whole table, for a handful of tasks due. Now a task is noted when it is
saved finished, a pass reads the notes due, and the whole table is looked through once
per retention (for notes an outage lost).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from a2a.types import TaskState
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.retention import purge

from .._postgres import pg_database_url
from ._helpers import make_task, settings
from .test_recovery import eventually, put
from .test_unrelated_rows_e2e import FEW, _rows_read

pytest.importorskip("asyncpg")

#: finished tasks kept, none of them due
KEPT = 20_000
#: tasks due at the pass
DUE = 20
_NOTES = "apcore_a2a_finished_tasks"


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    with pg_database_url() as url:
        yield url, url.rsplit("/", 1)[1].split("?")[0]


async def test_a_retention_pass_reads_the_tasks_due_not_the_tasks_kept(
    database: tuple[str, str],
) -> None:
    url, name = database
    stores = open_stores(url, settings())
    await stores.start()
    try:
        assert stores.engine is not None
        async with stores.engine.begin() as conn:
            for prefix, count, at in (
                ("kept", KEPT, "extract(epoch from now())"),
                ("due", DUE, "0"),
            ):
                await conn.execute(
                    text(
                        "INSERT INTO tasks (id, context_id, kind, status, protocol_version) "
                        f"SELECT '{prefix}-' || g, 'c', 'task', "
                        "'{\"state\": \"TASK_STATE_COMPLETED\"}', '1.0' "
                        f"FROM generate_series(1, {count}) g"
                    )
                )
                await conn.execute(
                    text(
                        f"INSERT INTO {_NOTES} SELECT '{prefix}-' || g, {at} "
                        f"FROM generate_series(1, {count}) g"
                    )
                )
            # As autovacuum would after such an insert: a plan by the tables' statistics.
            await conn.execute(text(f"ANALYZE tasks, {_NOTES}"))
    finally:
        await stores.aclose()
    # Counts are read once every client has gone (a backend reports them as it exits):
    # the passes run on an engine of their own, disposed before the second reading.
    tasks, notes = await _rows_read(name, "tasks"), await _rows_read(name, _NOTES)
    engine = create_engine(parse_store_url(url))
    try:
        deleted = sum([await purge(engine, 3600, []) for _ in range(3)])
    finally:
        await engine.dispose()
    assert deleted == DUE
    read_tasks = await _rows_read(name, "tasks") - tasks
    read_notes = await _rows_read(name, _NOTES) - notes
    # Before: 3 x 20,020 rows of tasks and about as many notes.
    assert read_tasks + read_notes <= FEW, (read_tasks, read_notes)


async def test_a_task_saved_finished_is_noted_at_once(pg_url: str) -> None:
    """Noted when saved, by the database's clock, not at a pass (retention 1 h: the
    first pass comes after 5 minutes)."""
    stores = open_stores(pg_url, settings(task_retention_seconds=3600.0))
    await stores.start()
    try:
        assert stores.engine is not None
        engine = stores.engine
        waiting = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
        done = make_task(TaskState.TASK_STATE_COMPLETED)
        await put(stores, waiting)
        await put(stores, done)

        async def noted() -> bool:
            async with engine.connect() as conn:
                found = await conn.execute(text(f"SELECT task_id FROM {_NOTES}"))
                return [row[0] for row in found] == [done.id]

        await eventually(noted)  # was: not before the first pass
    finally:
        await stores.aclose()
