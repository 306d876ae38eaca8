"""The start of an agent on an application's own a2a-sdk ``DatabaseTaskStore`` (docs/storage.md,
*Your own task store*): the indexes its ``ListTasks`` pages and context check read, on the
table the store creates, named after that table; a table they cannot be built on (another
role's, a row no index can hold, one the application creates itself) is served without
them; one line says what the store does not get (restart recovery, retention)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore
from a2a.types import TaskState
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.contexts import INDEX_NAME
from apcore_a2a.storage.listing import STATE_INDEX_NAME
from tests.ops._agent import message_params, rpc, served

from ._helpers import ctx, index_names, make_task, settings

LOGGER = "apcore_a2a.storage"


async def _tasks_and_lists(http: Any) -> None:
    """A completed and a failed task; ``ListTasks`` by status finds each in its list."""
    done = await rpc(http, "SendMessage", message_params("ops.add", {"a": 1, "b": 2}))
    # In the same context: the context check reads the table (contexts.py).
    params = message_params("ops.fail", {"text": "x"})
    params["message"]["contextId"] = done["result"]["task"]["contextId"]
    failed = await rpc(http, "SendMessage", params)
    ids = {}
    for sent in (done, failed):
        task = sent["result"]["task"]
        ids[task["status"]["state"]] = task["id"]
    assert set(ids) == {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED"}, ids
    for state, task_id in ids.items():
        listed = await rpc(http, "ListTasks", {"status": state})
        assert [t["id"] for t in listed["result"]["tasks"]] == [task_id], listed


def _app_store(url: str, **options: Any) -> DatabaseTaskStore:
    return DatabaseTaskStore(create_engine(parse_store_url(url)), **options)


@pytest.fixture
async def disposed() -> AsyncIterator[list[DatabaseTaskStore]]:
    """Stores whose engines the test disposes of afterwards (the application's own)."""
    stores: list[DatabaseTaskStore] = []
    yield stores
    for store in stores:
        await store.engine.dispose()


async def test_the_start_indexes_the_table_the_apps_store_creates(
    sql_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(store := _app_store(sql_url))
    async with served(task_store=store) as (http, _app):
        assert {STATE_INDEX_NAME, INDEX_NAME} <= await index_names(sql_url)
        await _tasks_and_lists(http)
    assert f"reads the indexes {INDEX_NAME}, {STATE_INDEX_NAME}" in caplog.text


async def test_a_second_task_table_beside_ours_gets_indexes_of_its_own(
    sql_url: str, disposed: list[DatabaseTaskStore]
) -> None:
    # Index names are one namespace per schema (database): ours on `tasks` exist already.
    ours = open_stores(sql_url, settings())
    await ours.start()
    await ours.aclose()
    table = f"agent_{uuid.uuid4().hex[:8]}"  # the SDK maps a table name once per process
    disposed.append(store := _app_store(sql_url, table_name=table))
    async with served(task_store=store) as (http, _app):
        assert await index_names(sql_url, table) >= {
            f"ix_apcore_a2a_{table}_context_owner_updated_id",
            f"ix_apcore_a2a_{table}_owner_state_updated_id",
        }
        await _tasks_and_lists(http)


async def test_a_table_the_application_creates_itself_is_left_as_it_is(
    sql_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(maker := _app_store(sql_url))
    await maker.initialize()  # the application's own migration
    before = await index_names(sql_url)
    disposed.append(store := _app_store(sql_url, create_table=False))
    async with served(task_store=store) as (http, _app):
        await _tasks_and_lists(http)
    assert await index_names(sql_url) == before
    said = [r for r in caplog.records if "create_table=False" in r.message]
    assert len(said) == 1 and said[0].levelname == "INFO", caplog.text
    assert (
        f"CREATE INDEX IF NOT EXISTS {STATE_INDEX_NAME} ON tasks (owner, (CASE" in said[0].message
    )


async def test_a_row_no_index_can_hold_costs_the_index_only(
    tmp_path: Path, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    disposed.append(maker := _app_store(url))
    await maker.initialize()
    with sqlite3.connect(tmp_path / "app.db") as db:  # another owner's row, not JSON
        db.execute(
            "INSERT INTO tasks (id, context_id, kind, owner, status, protocol_version) "
            "VALUES ('broken', 'c', 'task', 'someone-else', '{not json', '1.0')"
        )
    disposed.append(store := _app_store(url))
    async with served(task_store=store) as (http, _app):
        await _tasks_and_lists(http)
    built = await index_names(url)
    assert STATE_INDEX_NAME not in built and INDEX_NAME in built, built
    said = [r for r in caplog.records if "could not create" in r.message]
    assert len(said) == 1 and said[0].levelname == "WARNING", caplog.text
    assert "malformed JSON" in said[0].message and "CREATE INDEX" in said[0].message


@pytest.mark.postgres
async def test_a_table_of_another_role_is_served_without_indexes(
    pg_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    from .._postgres import PG_USER, pg_execute

    disposed.append(maker := _app_store(pg_url))
    await maker.initialize()  # owned by the test's (super)user
    schema = pg_url.split("schema=", 1)[1].split("&", 1)[0]
    role = f"apcore_a2a_t_{uuid.uuid4().hex[:12]}"
    pg_execute(f"CREATE ROLE {role} LOGIN")
    try:
        pg_execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        pg_execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.tasks TO {role}")
        url = pg_url.replace(f"postgresql://{PG_USER}@", f"postgresql://{role}@", 1)
        disposed.append(store := _app_store(url))
        async with served(task_store=store) as (http, _app):
            await _tasks_and_lists(http)
        said = [r for r in caplog.records if "could not create" in r.message]
        assert len(said) == 1 and said[0].levelname == "WARNING", caplog.text
        assert "must be owner" in said[0].message
    finally:
        await store.engine.dispose()
        pg_execute(f"DROP OWNED BY {role}")
        pg_execute(f"DROP ROLE {role}")


@pytest.mark.postgres
async def test_a_table_the_role_cannot_create_is_said_as_such(
    pg_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    # No table and no right to create one: every call fails until it exists, which the
    # start says; it said the indexes were missing and the agent served "only slower".
    from .._postgres import PG_USER, pg_execute

    schema = pg_url.split("schema=", 1)[1].split("&", 1)[0]
    role = f"apcore_a2a_t_{uuid.uuid4().hex[:12]}"
    pg_execute(f"CREATE ROLE {role} LOGIN")
    try:
        pg_execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        url = pg_url.replace(f"postgresql://{PG_USER}@", f"postgresql://{role}@", 1)
        disposed.append(store := _app_store(url))
        async with served(task_store=store):
            pass
        said = [r for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
        assert [r.levelname for r in said] == ["ERROR"], caplog.text
        assert "could not create the application's table 'tasks'" in said[0].message
        assert "permission denied for schema" in said[0].message
        assert "every call on a task fails until it exists" in said[0].message
    finally:
        await store.engine.dispose()
        pg_execute(f"DROP OWNED BY {role}")
        pg_execute(f"DROP ROLE {role}")


async def test_the_start_says_a_crash_leaves_its_tasks_working_and_retention_is_off(
    tmp_path: Path, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    disposed.append(store := _app_store(url))
    left = make_task(TaskState.TASK_STATE_WORKING)  # as a process killed mid-run left it
    await store.save(left, ctx())
    caplog.set_level(logging.INFO, logger=LOGGER)
    for retention in (None, 60.0):
        caplog.clear()
        async with served(task_store=store, task_retention_seconds=retention):
            pass
        said = [r for r in caplog.records if "the application's own" in r.message]
        assert len(said) == 1, caplog.text
        assert "left submitted or working stay so" in said[0].message
        assert said[0].levelname == ("INFO" if retention is None else "WARNING")
        assert ("task_retention_seconds=60" in said[0].message) is (retention is not None)
        kept = await store.get(left.id, ctx())
        assert kept is not None and kept.status.state == TaskState.TASK_STATE_WORKING


async def test_a_store_that_is_not_sql_is_told_only_about_retention(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Mine(InMemoryTaskStore):
        pass

    caplog.set_level(logging.INFO, logger=LOGGER)
    async with served(task_store=Mine()):
        pass
    assert "the application's own" not in caplog.text
    async with served(task_store=Mine(), task_retention_seconds=60):
        pass
    said = [r for r in caplog.records if "the application's own" in r.message]
    assert [r.levelname for r in said] == ["WARNING"], caplog.text
    assert "task_retention_seconds=60" in said[0].message and "Mine" in said[0].message


async def test_agents_starting_together_on_one_table_all_index_it_quietly(
    sql_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    disposed.extend(_app_store(sql_url) for _ in range(3))
    agents = [open_stores(store, settings()) for store in disposed]
    await asyncio.gather(*(agent.start() for agent in agents))
    for agent in agents:
        await agent.aclose()
    assert {STATE_INDEX_NAME, INDEX_NAME} <= await index_names(sql_url)
    assert "could not create" not in caplog.text


@pytest.mark.postgres
async def test_a_transaction_the_application_holds_open_never_stalls_the_start(
    pg_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    # An index is built under a lock that waits for every open write on the table and
    # holds back every write queued behind it: the start neither waits for the
    # application's open transaction nor stalls its other writers. (SQLite has one
    # writer: an open write there holds back every other anyway.)
    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(maker := _app_store(pg_url))
    await maker.initialize()
    disposed.append(store := _app_store(pg_url))
    for indexed in (False, True):
        caplog.clear()
        async with maker.engine.connect() as app, app.begin():
            await app.execute(text("UPDATE tasks SET kind = kind"))  # holds its write lock
            async with asyncio.timeout(60):  # against a hang, not a measure
                async with served(task_store=store) as (http, _app):
                    sent = await rpc(
                        http, "SendMessage", message_params("ops.add", {"a": 1, "b": 2})
                    )
                    assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", sent
        said = [r for r in caplog.records if "could not create" in r.message]
        assert [r.levelname for r in said] == ([] if indexed else ["WARNING"]), caplog.text
        if not indexed:  # the next start, with nothing held open, creates them
            async with served(task_store=store):
                pass
            assert {STATE_INDEX_NAME, INDEX_NAME} <= await index_names(pg_url)


def _ours(record: logging.LogRecord) -> bool:
    """A record of the store's start (the agent's own lines, such as that it
    authenticates nobody, are not this file's subject)."""
    return record.name.startswith("apcore_a2a.storage")


async def test_an_index_of_our_name_over_other_columns_is_named_and_kept(
    sql_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    # Index names are one namespace per schema (database): an application's index of our
    # name, on our table over other columns or on another table, made the start skip the
    # index and say the table read it.
    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(maker := _app_store(sql_url))
    await maker.initialize()
    async with maker.engine.begin() as conn:
        await conn.execute(text(f"CREATE INDEX {INDEX_NAME} ON tasks (context_id)"))
        await conn.execute(text("CREATE TABLE app_notes (owner VARCHAR(255), id INTEGER)"))
        await conn.execute(text(f"CREATE INDEX {STATE_INDEX_NAME} ON app_notes (owner, id)"))
    disposed.append(store := _app_store(sql_url))
    async with served(task_store=store) as (http, _app):
        await _tasks_and_lists(http)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
    assert [r.levelname for r in said] == ["WARNING", "WARNING"], caplog.text
    context, state = (r.getMessage() for r in said)
    assert f"index {INDEX_NAME} covers tasks (context_id)" in context, context
    assert "not tasks (context_id, owner, last_updated, id)" in context, context
    assert f"index {STATE_INDEX_NAME} covers app_notes (owner, id)" in state, state
    assert "not tasks (owner, (CASE " in state and ", last_updated, id)" in state, state
    assert all("\n" not in r.getMessage() for r in said)
    assert "reads the indexes" not in caplog.text
    assert INDEX_NAME in await index_names(sql_url)  # the application's, left alone
    assert STATE_INDEX_NAME in await index_names(sql_url, "app_notes")
    # As the line advises: dropped, the next start creates ours; the one after reads them.
    async with maker.engine.begin() as conn:
        for name in (INDEX_NAME, STATE_INDEX_NAME):
            await conn.execute(text(f"DROP INDEX {name}"))
    for _ in range(2):
        caplog.clear()
        async with served(task_store=store):
            pass
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
        assert f"reads the indexes {INDEX_NAME}, {STATE_INDEX_NAME}" in caplog.text


async def test_an_index_of_our_name_no_query_can_read_whole_is_named_and_kept(
    sql_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    # Our name and our columns, but partial (a WHERE: only the rows it names are in it),
    # another expression in the state's place, or in another order: the start counted
    # them as the indexes its reads use, said the table read them, and left it at that.
    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(maker := _app_store(sql_url))
    await maker.initialize()
    dialect = maker.engine.dialect.name
    other_state = "(status ->> 'id')" if dialect == "postgresql" else "json_extract(status, '$.id')"
    made = {
        INDEX_NAME: "(context_id, owner, last_updated, id) WHERE owner IS NOT NULL",
        STATE_INDEX_NAME: f"(owner, ({other_state}), last_updated, id)",
    }
    async with maker.engine.begin() as conn:
        for name, keys in made.items():
            await conn.execute(text(f"CREATE INDEX {name} ON tasks {keys}"))
    disposed.append(store := _app_store(sql_url))
    async with served(task_store=store) as (http, _app):
        await _tasks_and_lists(http)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
    assert len(said) == 2, caplog.text
    assert f"index {INDEX_NAME} covers tasks (context_id, owner, last_updated, id) WHERE" in said[0]
    assert "not tasks (context_id, owner, last_updated, id)" in said[0], said[0]
    assert f"index {STATE_INDEX_NAME} covers tasks (owner, " in said[1], said[1]
    assert "'$.id'" in said[1] or "'id'" in said[1], said[1]
    assert "reads the indexes" not in caplog.text
    # The one our reads need, of our name, made by the application: counted as ours.
    async with maker.engine.begin() as conn:
        await conn.execute(text(f"DROP INDEX {INDEX_NAME}"))
        await conn.execute(text(f"DROP INDEX {STATE_INDEX_NAME}"))
        await conn.execute(text(f'CREATE INDEX "{INDEX_NAME}" ON "tasks" '
                                "( context_id,OWNER , last_updated,id )"))  # fmt: skip
    caplog.clear()
    async with served(task_store=store):
        pass
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
    assert f"reads the indexes {INDEX_NAME}, {STATE_INDEX_NAME}" in caplog.text


@pytest.mark.postgres
async def test_an_index_a_concurrent_build_left_invalid_is_named_not_counted(
    pg_url: str, disposed: list[DatabaseTaskStore], caplog: pytest.LogCaptureFixture
) -> None:
    # docs/storage.md advises building the indexes CONCURRENTLY on a large table; one cut
    # short (here by a statement timeout, while the application holds a write open) stays
    # in the catalog, invalid, read by no query, and IF NOT EXISTS took it for built. So
    # was a hash index over our first column (no query of ours reads it).
    from sqlalchemy.exc import DBAPIError

    caplog.set_level(logging.INFO, logger=LOGGER)
    disposed.append(maker := _app_store(pg_url))
    await maker.initialize()
    async with maker.engine.connect() as app, app.begin():
        await app.execute(text("UPDATE tasks SET kind = kind"))  # a write held open
        async with maker.engine.connect() as ops:
            ops = await ops.execution_options(isolation_level="AUTOCOMMIT")
            await ops.execute(text("SET statement_timeout = '300ms'"))
            with pytest.raises(DBAPIError, match="statement timeout"):
                await ops.execute(
                    text(
                        f"CREATE INDEX CONCURRENTLY {INDEX_NAME} ON tasks "
                        "(context_id, owner, last_updated, id)"
                    )
                )
    async with maker.engine.begin() as conn:
        await conn.execute(text(f"CREATE INDEX {STATE_INDEX_NAME} ON tasks USING hash (owner)"))
    disposed.append(store := _app_store(pg_url))
    async with served(task_store=store):
        pass
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and _ours(r)]
    assert len(said) == 2, caplog.text
    assert "(invalid: its build did not finish)" in said[0], said[0]
    assert f"index {STATE_INDEX_NAME} covers tasks USING hash (owner)" in said[1], said[1]
    assert "reads the indexes" not in caplog.text
