"""Task store URLs and the setting combinations open_stores accepts or refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.server.cluster import VersionedTaskStore
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore

from apcore_a2a.storage import BoundedMemoryTaskStore, StoreUnavailableError, open_stores
from apcore_a2a.storage._urls import parse_store_url

from ._helpers import settings


@pytest.mark.parametrize(
    ("url", "driver", "database"),
    [
        ("sqlite:///tasks.db", "sqlite+aiosqlite", "tasks.db"),
        ("sqlite:////var/lib/a2a/tasks.db", "sqlite+aiosqlite", "/var/lib/a2a/tasks.db"),
        ("sqlite+aiosqlite:///t.db", "sqlite+aiosqlite", "t.db"),
        ("postgresql://u@db.internal/app", "postgresql+asyncpg", "app"),
        ("postgres://u:pw@db.internal:6543/app", "postgresql+asyncpg", "app"),
        ("postgresql+asyncpg://u@h/app", "postgresql+asyncpg", "app"),
    ],
)
def test_async_driver_is_chosen(url: str, driver: str, database: str) -> None:
    parsed = parse_store_url(url)
    assert parsed.url is not None
    assert parsed.url.drivername == driver
    assert parsed.url.database == database


def test_memory_url() -> None:
    assert parse_store_url("memory://").kind == "memory"
    assert parse_store_url(" memory:// ").url is None


def test_password_is_masked_in_display() -> None:
    parsed = parse_store_url("postgresql://app:s3cr3t@db:5432/tasks")
    assert "s3cr3t" not in parsed.display
    assert "***" in parsed.display
    assert parsed.url is not None
    assert parsed.url.password == "s3cr3t"


def test_postgres_schema_and_sslmode_become_driver_arguments() -> None:
    parsed = parse_store_url("postgresql://u@h/db?schema=tenant_1&sslmode=require")
    assert parsed.connect_args["server_settings"] == {"search_path": "tenant_1"}
    assert parsed.connect_args["ssl"] == "require"
    assert parsed.url is not None
    assert not parsed.url.query


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "empty"),
        ("tasks.db", "no scheme"),
        ("mysql://u@h/db", "unsupported task store URL scheme"),
        ("redis://localhost", "unsupported task store URL scheme"),
        ("memory://somewhere", "takes no path"),
        ("sqlite+pysqlite:///t.db", "driver 'pysqlite' is not supported"),
        ("sqlite://host/t.db", "host part"),
        # a variable left empty (sqlite:///$DB): not a throwaway in-memory store, silently
        ("sqlite://", "names no file"),
        ("sqlite:///", "names no file"),
        ("sqlite:///t.db?mode=ro", "take no options"),
        ("postgresql+psycopg2://u@h/db", "driver 'psycopg2' is not supported"),
        ("postgresql://u@h", "names no database"),
        ("postgresql://u@h/db?schema=a;drop", "plain SQL identifier"),
        ("postgresql://u@h/db?sslmode=maybe", "sslmode must be one of"),
        ("postgresql://u@h/db?pool=3", "unsupported PostgreSQL task store options"),
        ("postgresql://u@h/db?pgbouncer=yes", "pgbouncer must be true or false"),
        # PgBouncer refuses search_path at startup; without it the tables would land in
        # the role's own schema, silently
        ("postgresql://u@h/db?pgbouncer=true&schema=t", "schema cannot be set through PgBouncer"),
    ],
)
def test_bad_urls_raise_value_error_naming_the_problem(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        open_stores(url, settings())


@pytest.mark.parametrize(
    "url",
    [
        "memory://admin:hunter2@x",
        "memory:admin:hunter2@x",
        "hunter2",
        "admin:hunter2@db.example/tasks",
        "db.example/tasks?password=hunter2",
        "sqlite://admin:hunter2@/tasks.db",
        "postgresql://admin:hunter2@db.example:99999/tasks",
        "postgresql://admin:hunter2@db.example/tasks?sslmode=maybe",
    ],
)
def test_a_refused_url_never_shows_its_password(url: str) -> None:
    # open_stores is public: an app's traceback or log shows this message unmasked.
    with pytest.raises(ValueError) as caught:
        open_stores(url, settings())
    assert "hunter2" not in str(caught.value), caught.value


def test_cluster_mode_refuses_memory() -> None:
    with pytest.raises(ValueError, match="cluster mode needs a shared SQL task store"):
        open_stores("memory://", settings(cluster=True))


def test_cluster_mode_refuses_a_store_object() -> None:
    with pytest.raises(ValueError, match="cluster mode needs a shared SQL task store"):
        open_stores(InMemoryTaskStore(), settings(cluster=True))


def test_cluster_mode_refuses_a_non_positive_poll_interval() -> None:
    with pytest.raises(ValueError, match="cluster_poll_interval"):
        open_stores("sqlite:///x.db", settings(cluster=True, cluster_poll_interval=0))


async def test_a_store_object_is_used_as_is() -> None:
    mine = InMemoryTaskStore()
    stores = open_stores(mine, settings())
    assert stores.task_store.inner is mine  # type: ignore[union-attr]
    assert isinstance(stores.push_config_store, InMemoryPushNotificationConfigStore)
    assert stores.event_stream is None
    assert stores.engine is None
    await stores.start()
    await stores.ping()
    await stores.aclose()


def test_defaults_are_bounded_memory() -> None:
    stores = open_stores(settings().task_store, settings())
    memory = stores.task_store.inner  # type: ignore[union-attr]
    assert isinstance(memory, BoundedMemoryTaskStore)
    assert memory.max_capacity == 10_000


async def test_sql_urls_do_no_io_until_started(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    sqlite = open_stores(f"sqlite:///{db}", settings())
    assert not db.exists()  # opening created nothing
    await sqlite.start()
    assert db.exists()  # start did
    await sqlite.aclose()
    # Nothing listens on port 1 and the directory does not exist: opening still works,
    # and the failure comes at start, where the database is first reached.
    for url in ("postgresql://u@127.0.0.1:1/db", "sqlite:////nonexistent-dir/t.db"):
        stores = open_stores(url, settings(cluster=url.startswith("postgresql")))
        try:
            with pytest.raises(StoreUnavailableError):
                await stores.start()
        finally:
            await stores.aclose()


def test_cluster_sql_store_is_versioned_with_an_event_stream() -> None:
    stores = open_stores("sqlite:///x.db", settings(cluster=True))
    assert isinstance(stores.task_store, VersionedTaskStore)
    assert stores.event_stream is not None
    assert stores.engine is not None
