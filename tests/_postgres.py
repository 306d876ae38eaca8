"""The PostgreSQL server the tests use, and what each test may ask of it.

``APCORE_A2A_TEST_POSTGRES_URL`` names the server, its user and a database the tests may use
(default ``postgresql://postgres@127.0.0.1:5432/test``); a password comes from ``PGPASSWORD``
(read by asyncpg in the tests and in every agent they start). The user must be able to
create schemas, databases and roles (a superuser, as the tests check roles' limits).

Every test gets a schema (or database) of its own, dropped afterwards, and a URL whose
``?pool_size=`` is :data:`POOL_SIZE`: an agent process (a server, each of its workers, or a
store set opened in the test's own process) then holds at most :data:`PER_AGENT`
connections. A test states how many agents it runs at once on the server; before it runs,
the server must have that many times :data:`PER_AGENT`, plus one for the test itself, free
under every limit (``max_connections`` less the reserved ones, the role's and the
database's ``CONNECTION LIMIT``). When it has not, or is not reachable at all, the test is
skipped with the reason, except under ``CI`` where it must run and so fails with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from sqlalchemy.engine import make_url

from apcore_a2a.storage._sql_backend import _LIMITS as CONNECTION_LIMITS
from tests._support import cannot_run_here

_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
_URL = make_url(os.environ.get("APCORE_A2A_TEST_POSTGRES_URL") or _DEFAULT)
if _URL.password is not None:
    raise pytest.UsageError(
        "APCORE_A2A_TEST_POSTGRES_URL carries a password; pass it in PGPASSWORD instead "
        "(the tests hand the URL to agents, whose logs would show it)"
    )
PG_HOST = _URL.host or "127.0.0.1"
PG_PORT = _URL.port or 5432
PG_USER = _URL.username or "postgres"
PG_DB = _URL.database or "test"
#: a password for URLs that show one (masking tests): the server's, else any (trust auth)
PG_PASSWORD = os.environ.get("PGPASSWORD") or "not-a-password"

#: the ``?pool_size=`` of the URLs handed to tests (the agent's default is 20)
POOL_SIZE = 4
#: connections one agent process holds at most: its pool, the writer's, the listener's,
#: the lock's
PER_AGENT = POOL_SIZE + 3

# Free connections under each limit: the agent's own start check's query (what limits
# it, its value, open now), so the tests count as the agent does.
_FREE = CONNECTION_LIMITS


def _where() -> str:
    return f"PostgreSQL at {PG_USER}@{PG_HOST}:{PG_PORT}/{PG_DB}"


def cannot_run(reason: str) -> NoReturn:
    cannot_run_here(f"PostgreSQL: {reason}")


def _run(sql: str, fetch: bool = False) -> list[Any]:
    """Run one statement on the test database, off the (maybe running) test loop."""
    import asyncpg

    async def run() -> list[Any]:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            return list(await conn.fetch(sql)) if fetch else [await conn.execute(sql)]
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def pg_execute(sql: str) -> None:
    """Run one statement on the test database as the test's user."""
    _run(sql)


def require_postgres(agents: int = 1) -> None:
    """Skip (fail under ``CI``) unless the server is reachable and can give *agents* agent
    processes their connections now, plus one for the test."""
    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=1.0).close()
    except OSError:
        cannot_run(
            f"{_where()} is not reachable; start it or point APCORE_A2A_TEST_POSTGRES_URL "
            "at another server"
        )
    import asyncpg

    need = agents * PER_AGENT + 1
    try:
        limits = _run(_FREE, fetch=True)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # e.g. "too many clients already", a role or database that does not exist
        cannot_run(f"{_where()} refused the test's connection: {exc}")
    for what, limit, open_now in limits:
        free = limit - open_now + 1  # +1: the connection that asked is closed now
        if limit >= 0 and free < need:
            cannot_run(
                f"this test needs {need} free connections to {_where()} ({agents} agent(s) x "
                f"{PER_AGENT} + 1), but {what} leaves {free} ({limit} allowed, "
                f"{open_now - 1} open); close other clients (see pg_stat_activity), raise "
                "the limit, run with -n 0, or point APCORE_A2A_TEST_POSTGRES_URL at another "
                "server"
            )


def _url(database: str, pool_size: int | None, schema: str | None = None) -> str:
    # The schema goes last: tests read it back with ``url.rsplit("schema=", 1)``.
    query = []
    if pool_size is not None:
        query.append(f"pool_size={pool_size}")
    if schema is not None:
        query.append(f"schema={schema}")
    base = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"
    return f"{base}?{'&'.join(query)}" if query else base


@contextlib.contextmanager
def pg_schema_url(agents: int = 1, pool_size: int | None = POOL_SIZE) -> Iterator[str]:
    """A fresh schema in the test database for *agents* agent processes at once, dropped
    on exit; yields its URL (with ``?pool_size=`` *pool_size*, none when ``None``)."""
    require_postgres(agents)
    schema = f"apcore_a2a_t_{uuid.uuid4().hex[:12]}"
    pg_execute(f"CREATE SCHEMA {schema}")
    try:
        yield _url(PG_DB, pool_size, schema)
    finally:
        pg_execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def pg_database_url(agents: int = 1, pool_size: int | None = POOL_SIZE) -> Iterator[str]:
    """A fresh database of its own (its transaction counters count only its clients) for
    *agents* agent processes at once, dropped on exit; yields its URL."""
    require_postgres(agents)
    name = f"apcore_a2a_d_{uuid.uuid4().hex[:12]}"
    pg_execute(f"CREATE DATABASE {name}")
    try:
        yield _url(name, pool_size)
    finally:
        pg_execute(f"DROP DATABASE {name} WITH (FORCE)")


@contextlib.contextmanager
def store_url(kind: str, folder: Path, agents: int = 1) -> Iterator[str]:
    """A SQL task store URL for *agents* agent processes at once: *kind* ``"sqlite"`` a
    database file in *folder*, ``"postgresql"`` a fresh schema (:func:`pg_schema_url`)."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'tasks.db'}"
    else:
        with pg_schema_url(agents=agents) as url:
            yield url


async def kill_slot_renames(
    schema: str, scope: str, on: bool, *, deletes: bool = False, rowless: bool = False
) -> None:
    """While *on*, a rename of one of *schema*'s quota slots of *scope* (a request's ``r:``
    row handed to a task or a config) loses its connection, as in an outage: a trigger ends
    the renaming session's backend; off, the trigger is dropped. With *deletes*, a delete
    of a request's row does instead (an idle lease freed). With *rowless*, every update
    of the table does, whether it matches a row or not (*scope* unread)."""
    import asyncpg

    table = f"{schema}.apcore_a2a_quota_slots"
    name, event = ("kill_deletes", "DELETE") if deletes else ("kill_renames", "UPDATE")
    renamed = "TRUE" if deletes else "NEW.holder NOT LIKE 'r:%'"
    sql = f"DROP TRIGGER IF EXISTS {name} ON {table}"
    if on and rowless:
        sql = f"""
        CREATE OR REPLACE FUNCTION {schema}.{name}() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); END $$;
        CREATE TRIGGER {name} BEFORE {event} ON {table}
        FOR EACH STATEMENT EXECUTE FUNCTION {schema}.{name}();
        """
    elif on:
        sql = f"""
        CREATE OR REPLACE FUNCTION {schema}.{name}() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.holder LIKE 'r:%' AND {renamed} THEN
                PERFORM pg_terminate_backend(pg_backend_pid());
            END IF;
            RETURN COALESCE(NEW, OLD);
        END $$;
        CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW
        WHEN (OLD.scope = '{scope}') EXECUTE FUNCTION {schema}.{name}();
        """
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
