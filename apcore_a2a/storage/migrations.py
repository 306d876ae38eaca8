"""Bring a SQL task store's schema up to date (``apcore-a2a db upgrade``).

Creates the base tables the SDK stores would create on first use, applies the a2a-sdk's
own Alembic migrations (which add the cluster tables ``task_versions``/``task_events``
and upgrade databases written by older SDKs), and creates our cluster bookkeeping tables.
The SDK's migrations run on our connection through Alembic's programmatic API, recorded
in the SDK's version table, so ``a2a-db current`` agrees with us afterwards.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from a2a.server.models import TaskEventModel, TaskModel
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy import inspect

from . import quota_slots, retention  # noqa: F401  (their tables join METADATA)
from ._replicas import METADATA
from ._urls import check_sqlite_folder, create_engine, create_index, drop_index, parse_store_url
from .contexts import OLD_INDEX_NAME, context_index
from .event_index import INDEX_NAME as EVENT_INDEX
from .listing import state_index
from .running import INDEX_NAME as RUNNING_INDEX
from .running import PREDICATE as RUNNING

#: The Alembic version table the a2a-sdk's migrations use.
SDK_VERSION_TABLE = "a2a_alembic_version"


async def upgrade_database(task_store_url: str) -> list[str]:
    """Upgrade the database behind *task_store_url*; returns human-readable report lines.

    Raises ``ValueError`` for a URL that is not a SQL store, and lets connection errors
    propagate.
    """
    store_url = parse_store_url(task_store_url)
    if store_url.url is None:
        raise ValueError(
            f"{store_url.display} keeps tasks in memory; there is no schema to upgrade"
        )
    from a2a.server.tasks import DatabasePushNotificationConfigStore

    check_sqlite_folder(store_url)
    engine = create_engine(store_url)
    try:
        async with engine.connect() as conn:
            before = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        tasks = DatabaseTaskStore(engine)
        await tasks.initialize()
        await DatabasePushNotificationConfigStore(engine).initialize()
        async with engine.begin() as conn:
            old_rev, new_rev = await conn.run_sync(_run_sdk_migrations)
            await conn.run_sync(METADATA.create_all)
        await create_indexes(tasks)
        async with engine.connect() as conn:
            after = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()

    lines = [f"database: {store_url.display}"]
    created = sorted(after - before - {SDK_VERSION_TABLE})
    lines += [f"created table {name}" for name in created]
    if old_rev == new_rev:
        lines.append(f"a2a-sdk schema already at revision {new_rev} (head); nothing to migrate")
    else:
        lines.append(f"a2a-sdk schema migrated: {old_rev or 'none'} -> {new_rev}")
    if not created and old_rev == new_rev:
        lines.append("schema is up to date")
    return lines


async def create_indexes(tasks: DatabaseTaskStore) -> None:
    """Create the indexes of the agent's reads on *tasks*' tables unless they exist, and
    drop the one the context check's replaced."""
    engine = tasks.engine
    await create_index(engine, *context_index(tasks))  # the context check's (contexts.py)
    await drop_index(engine, OLD_INDEX_NAME)
    events = TaskEventModel.__tablename__
    await create_index(engine, EVENT_INDEX, events, "task_id, seq")  # event_index.py
    await create_index(engine, *state_index(tasks))  # ListTasks filtered by status (listing.py)
    where = RUNNING[engine.dialect.name]  # restart recovery (running.py)
    await create_index(engine, RUNNING_INDEX, TaskModel.__tablename__, "id", where=where)


def _sdk_scripts() -> tuple[Any, Any]:
    """The a2a-sdk's Alembic configuration and its migration scripts."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(files("a2a").joinpath("migrations")))
    return config, ScriptDirectory.from_config(config)


def unknown_revision(sync_conn: Any) -> str | None:
    """The a2a-sdk schema revision the database records when this a2a-sdk has no such
    migration (a newer version wrote the database), else ``None``."""
    if not inspect(sync_conn).has_table(SDK_VERSION_TABLE):
        return None
    from alembic.runtime.migration import MigrationContext
    from alembic.util import CommandError

    ctx = MigrationContext.configure(sync_conn, opts={"version_table": SDK_VERSION_TABLE})
    revisions = ctx.get_current_heads()
    _config, script = _sdk_scripts()
    for revision in revisions:
        try:
            script.get_revision(revision)
        except CommandError:  # alembic's ResolutionError: not among the scripts
            return str(revision)
    return None


def _run_sdk_migrations(sync_conn: Any) -> tuple[str | None, str | None]:
    from a2a.server.models import Base
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext

    config, script = _sdk_scripts()

    def current() -> str | None:
        ctx = MigrationContext.configure(sync_conn, opts={"version_table": SDK_VERSION_TABLE})
        return ctx.get_current_revision()

    old = current()

    def upgrade(rev: Any, _context: Any) -> Any:
        return script._upgrade_revs("head", rev)

    with EnvironmentContext(config, script, fn=upgrade, destination_rev="head") as env:
        env.configure(
            connection=sync_conn, target_metadata=Base.metadata, version_table=SDK_VERSION_TABLE
        )
        with env.begin_transaction():
            env.run_migrations()
    return old, current()
