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

from sqlalchemy import Engine, event, make_url
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from ._urls import StoreURL

__all__ = ["READ_ONLY", "SQLITE_BUSY_TIMEOUT_MS", "create_engine", "create_sqlite_writer_engine"]

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
        # Half kept open, half opened under load and closed again.
        pool_size=(store_url.pool_size + 1) // 2,
        max_overflow=store_url.pool_size // 2,
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
    _tune_sqlite(engine.sync_engine, in_memory=in_memory)
    return engine


def create_sqlite_writer_engine(store_url: StoreURL) -> Engine | None:
    """A synchronous engine on the same SQLite file, for a single writer thread.

    Through aiosqlite every statement is a hop to its connection thread and back (checkout,
    BEGIN, the upsert, COMMIT, the reset on return: each one a wakeup of the event loop).
    The batched writer instead runs a whole transaction in one hop on a thread of its own
    with this engine: same file, same pragmas, same ``BEGIN IMMEDIATE``. ``None`` for an
    in-memory database, which only the async engine's one connection can see.
    """
    if store_url.kind != "sqlite" or store_url.url is None or store_url.sqlite_path is None:
        return None
    url = make_url(store_url.url).set(drivername="sqlite")
    # One thread uses it, one connection at a time: a single pooled connection suffices.
    engine = sa_create_engine(url, pool_size=1, max_overflow=0)
    _tune_sqlite(engine, in_memory=False)
    return engine


def _tune_sqlite(engine: Engine, *, in_memory: bool) -> None:
    @event.listens_for(engine, "connect")
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

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Our own read-only probes opt out, so a health check never queues for the lock.
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
