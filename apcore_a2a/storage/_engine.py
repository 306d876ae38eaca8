"""SQLAlchemy async engines tuned per backend.

SQLite: WAL journal (readers never block the writer), a busy timeout so concurrent
writers wait instead of failing, and ``BEGIN IMMEDIATE`` so a transaction takes the
write lock up front. Without the latter, two transactions that read and then write (the
SDK's ``session.merge``) can deadlock on the lock upgrade, which SQLite reports at once as
"database is locked" instead of waiting.

PostgreSQL: asyncpg with a connect timeout and pre-ping, so connections broken by a
database restart are replaced transparently.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from ._urls import StoreURL

__all__ = ["READ_ONLY", "SQLITE_BUSY_TIMEOUT_MS", "create_engine"]

SQLITE_BUSY_TIMEOUT_MS = 15_000
#: Execution option for connections that only read (SQLite then takes no write lock).
READ_ONLY = "apcore_a2a_read_only"


def create_engine(store_url: StoreURL) -> AsyncEngine:
    """Create (without connecting) the engine for a SQL :class:`StoreURL`."""
    if store_url.url is None:
        raise ValueError(f"{store_url.display} is not a SQL task store")
    if store_url.kind == "sqlite":
        return _sqlite_engine(store_url)
    return create_async_engine(
        store_url.url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=10,
        connect_args=dict(store_url.connect_args),
    )


def _sqlite_engine(store_url: StoreURL) -> AsyncEngine:
    assert store_url.url is not None
    in_memory = store_url.sqlite_path is None
    # Few connections: SQLite runs one writer at a time anyway, and waiting in the pool
    # is fair and immediate, whereas SQLite's busy handler polls with growing sleeps
    # (seconds of tail latency with many contenders). More than one lets one request's
    # Python work overlap another's SQL. The busy timeout covers other processes.
    kwargs: dict[str, Any] = {"pool_size": 4, "max_overflow": 0}
    if in_memory:
        # One shared connection, or every checkout would see a fresh empty database.
        kwargs = {"poolclass": StaticPool, "connect_args": {"check_same_thread": False}}
    engine = create_async_engine(store_url.url, **kwargs)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (see module docstring).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not in_memory:
            cursor.execute("PRAGMA journal_mode = WAL")
            # Durable against process crashes (kill -9); only an OS crash may lose the
            # last transactions, which is the documented WAL trade-off.
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Our own read-only probes opt out, so a health check never queues for the lock.
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
