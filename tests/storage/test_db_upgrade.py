"""``apcore-a2a db upgrade``: creates tables, applies the SDK migrations, says what it did."""

from __future__ import annotations

import argparse

import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import TaskState
from sqlalchemy import inspect, text

from apcore_a2a.cli import db as _cli_db
from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.contexts import INDEX_NAME, OLD_INDEX_NAME
from apcore_a2a.storage.listing import STATE_INDEX_NAME, state_sql

from .._support import free_port
from ._helpers import ctx, index_names, make_task, settings

SDK_HEAD = "b5e3d1c8a2f7"


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="apcore-a2a")
    commands = parser.add_subparsers(dest="command")
    _cli_db.register(commands)
    args = parser.parse_args(list(argv))
    return int(args.func(args))


async def tables_and_revision(url: str) -> tuple[set[str], str | None]:
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.connect() as conn:
            names = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
            revision = None
            if "a2a_alembic_version" in names:
                result = await conn.execute(text("SELECT version_num FROM a2a_alembic_version"))
                revision = result.scalar_one()
        return names, revision
    finally:
        await engine.dispose()


def upgrade(url: str) -> int:
    # The command runs its own event loop (as the CLI does), so call it off ours.
    return run_cli("db", "upgrade", "--task-store", url)


async def test_fresh_database_gets_every_table_and_the_sdk_head(
    sql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    assert await asyncio.to_thread(upgrade, sql_url) == 0
    out = capsys.readouterr().out
    for table in ("tasks", "push_notification_configs", "task_versions", "task_events"):
        assert f"created table {table}" in out
    assert f"a2a-sdk schema migrated: none -> {SDK_HEAD}" in out
    names, revision = await tables_and_revision(sql_url)
    assert {"tasks", "task_versions", "task_events", "apcore_a2a_replicas"} <= names
    assert revision == SDK_HEAD

    assert await asyncio.to_thread(upgrade, sql_url) == 0
    again = capsys.readouterr().out
    assert "created table" not in again
    assert "nothing to migrate" in again
    assert "schema is up to date" in again


async def test_upgrading_a_plain_store_keeps_its_tasks_and_enables_cluster_mode(
    sql_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    # A store as earlier versions wrote it without cluster mode: the SDK's tasks only.
    engine = create_engine(parse_store_url(sql_url))
    plain = DatabaseTaskStore(engine)
    await plain.initialize()
    done = make_task(TaskState.TASK_STATE_COMPLETED)
    await plain.save(done, ctx())
    await engine.dispose()
    names, revision = await tables_and_revision(sql_url)
    assert "task_versions" not in names
    assert revision is None

    assert await asyncio.to_thread(upgrade, sql_url) == 0
    out = capsys.readouterr().out
    assert "created table task_versions" in out
    assert "created table tasks\n" not in out

    cluster = open_stores(sql_url, settings(cluster=True))
    await cluster.start()
    try:
        assert await cluster.get_task(done.id, ctx()) == done
    finally:
        await cluster.aclose()


# SQLAlchemy does not reflect SQLite's index on an expression (the status filter's).
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
async def test_upgrade_replaces_the_context_index_with_the_listing_one(sql_url: str) -> None:
    import asyncio

    # A store as the previous version left it: the context index on (context_id, owner).
    engine = create_engine(parse_store_url(sql_url))
    await DatabaseTaskStore(engine).initialize()
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE INDEX {OLD_INDEX_NAME} ON tasks (context_id, owner)"))
    await engine.dispose()

    assert await asyncio.to_thread(upgrade, sql_url) == 0
    engine = create_engine(parse_store_url(sql_url))
    try:
        async with engine.connect() as conn:
            indexes = await conn.run_sync(lambda c: inspect(c).get_indexes("tasks"))
    finally:
        await engine.dispose()
    columns = {index["name"]: index["column_names"] for index in indexes}
    assert columns[INDEX_NAME] == ["context_id", "owner", "last_updated", "id"]
    assert OLD_INDEX_NAME not in columns


async def test_upgrade_and_start_create_the_index_of_a_status_filter(sql_url: str) -> None:
    import asyncio

    engine = create_engine(parse_store_url(sql_url))
    await DatabaseTaskStore(engine).initialize()  # a store as the previous version left it
    await engine.dispose()
    assert STATE_INDEX_NAME not in await index_names(sql_url)
    assert await asyncio.to_thread(upgrade, sql_url) == 0
    assert STATE_INDEX_NAME in await index_names(sql_url)

    engine = create_engine(parse_store_url(sql_url))
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP INDEX {STATE_INDEX_NAME}"))
    await engine.dispose()
    stores = open_stores(sql_url, settings())
    await stores.start()
    await stores.aclose()
    assert STATE_INDEX_NAME in await index_names(sql_url)


def test_the_status_index_expression_is_the_one_databases_hold() -> None:
    # A database keeps the expression its index was built with, and a query spelled
    # otherwise does not read the index (correct pages, read without it). If a2a-sdk
    # renames or adds a state, this changes: give the index a new name (and drop the old).
    pairs = [("unknown", "UNSPECIFIED"), ("submitted", "SUBMITTED"), ("working", "WORKING"),
             ("completed", "COMPLETED"), ("failed", "FAILED"), ("canceled", "CANCELED"),
             ("input-required", "INPUT_REQUIRED"), ("rejected", "REJECTED"),
             ("auth-required", "AUTH_REQUIRED")]  # fmt: skip
    raw = "(status ->> 'state')"
    whens = " ".join(f"WHEN '{old}' THEN 'TASK_STATE_{new}'" for old, new in pairs)
    assert state_sql("postgresql") == f"CASE {raw} {whens} ELSE {raw} END"
    assert STATE_INDEX_NAME == "ix_apcore_a2a_tasks_owner_state_updated_id"


def test_memory_store_has_nothing_to_upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("db", "upgrade", "--task-store", "memory://") == 2
    assert "no schema to upgrade" in capsys.readouterr().err


def test_bad_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("db", "upgrade", "--task-store", "mysql://u@h/db") == 2
    assert "unsupported task store URL scheme" in capsys.readouterr().err


def test_unreachable_database_fails_without_leaking_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql://app:hunter2@127.0.0.1:{free_port()}/tasks"
    assert run_cli("db", "upgrade", "--task-store", url) == 1
    err = capsys.readouterr().err
    assert "upgrade failed" in err
    assert "hunter2" not in err


def test_task_store_defaults_to_the_environment_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/env.db"
    monkeypatch.setenv("A2A_TASK_STORE", url)
    assert run_cli("db", "upgrade") == 0
    assert "created table tasks" in capsys.readouterr().out


def test_db_needs_a_subcommand() -> None:
    with pytest.raises(SystemExit) as info:
        run_cli("db")
    assert info.value.code == 2


def test_a_database_of_a_newer_version_says_so(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """A revision this SDK does not know (written by a newer version) is not 'is the
    database running?': the line says the schema is newer and what to do."""
    import sqlite3

    url = f"sqlite:///{tmp_path}/newer.db"
    assert upgrade(url) == 0
    with sqlite3.connect(f"{tmp_path}/newer.db") as db:
        db.execute("UPDATE a2a_alembic_version SET version_num = 'ffff0000newer'")
    capsys.readouterr()
    assert upgrade(url) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: upgrade failed: ") and err.count("\n") == 1, err
    assert "'ffff0000newer'" in err and "newer version" in err, err
    assert "is the database running" not in err, err


def test_a_sqlite_database_in_a_missing_folder_says_to_create_the_folder(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """SQLite creates the file, not its folder: the line names the folder and what to do,
    not SQLite's 'unable to open database file' and 'is the database running?'."""
    folder = f"{tmp_path}/no/such"
    assert upgrade(f"sqlite:///{folder}/tasks.db") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"directory {folder} does not exist" in err, err
    assert f"mkdir -p {folder}" in err, err
    assert "unable to open" not in err and "is the database running" not in err, err
