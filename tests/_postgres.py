"""The PostgreSQL server the tests use, and what each test may ask of it.

``APCORE_A2A_TEST_POSTGRES_URL`` names the server, its user and a database the tests may use
(default ``postgresql://postgres@127.0.0.1:5432/test``); a password comes from ``PGPASSWORD``
(read by asyncpg in the tests and in every agent they start). The user must be able to
create schemas, databases and roles (a superuser, as the tests check roles' limits).

Every test gets a schema (or database) of its own, dropped afterwards, and a URL whose
``?pool_size=`` is :data:`POOL_SIZE`: an agent process (a server, each of its workers, or a
store set opened in the test's own process) then holds at most :data:`PER_AGENT`
connections. A test states how many agents it runs at once on the server; it holds that
many times :data:`PER_AGENT`, plus one for the test itself, of a budget every test process
on the machine shares (:func:`tokens`), and the server must have them free under every
limit (``max_connections`` less the reserved ones, the role's and the database's
``CONNECTION LIMIT``). When it has not, after waiting up to :data:`CONNECTION_WAIT_S` for
other test processes to release theirs, or is not reachable at all, the test is skipped
with the reason, except under ``CI`` where it must run and so fails with it.

Those waits sleep. A coroutine takes the context managers with ``async with`` (and calls
``await asyncio.to_thread(require_postgres, ...)``): the waits and statements then run in a
thread, and the test's loop, with the in-process agents on it (their heartbeats, leases),
runs on meanwhile. ``with`` is for code no event loop runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, NoReturn, ParamSpec, TypeVar

import pytest
from sqlalchemy.engine import make_url

from apcore_a2a.storage._sql_backend import _LIMITS as CONNECTION_LIMITS
from tests._support import cannot_run_here, try_lock

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


_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Held(Generic[_T]):
    """A context manager whose waits block its thread: ``with`` runs them there, ``async
    with`` in a worker thread, so the calling loop runs on (the module docstring)."""

    def __init__(self, held: contextlib.AbstractContextManager[_T]) -> None:
        self._held = held

    def __enter__(self) -> _T:
        return self._held.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        return self._held.__exit__(*exc)

    async def __aenter__(self) -> _T:
        return await asyncio.to_thread(self._held.__enter__)

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await asyncio.to_thread(self._held.__exit__, *exc)


def _held(make: Callable[_P, Iterator[_T]]) -> Callable[_P, _Held[_T]]:
    """:func:`contextlib.contextmanager`, its result also an async context manager."""
    entered = contextlib.contextmanager(make)

    @functools.wraps(make)
    def held(*args: _P.args, **kwargs: _P.kwargs) -> _Held[_T]:
        return _Held(entered(*args, **kwargs))

    return held


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


#: how long a test waits for the connections it needs, as other test processes' agents
#: stop (a bound on a wait, not a measure: the server refusing them later is worse)
CONNECTION_WAIT_S = 120.0
#: connections of the server the tests' reservations leave to other clients (the tests'
#: own statements beside their agents, ``psql``, other applications)
_MARGIN = 10
#: this process's token budget, read once from the server (see :func:`_reserve`)
_budget: list[int] = []


def _reachable() -> None:
    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=1.0).close()
    except OSError:
        cannot_run(
            f"{_where()} is not reachable; start it or point APCORE_A2A_TEST_POSTGRES_URL "
            "at another server"
        )


def _limits() -> list[Any]:
    import asyncpg

    try:
        return _run(_FREE, fetch=True)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # e.g. "too many clients already", a role or database that does not exist
        cannot_run(f"{_where()} refused the test's connection: {exc}")


def require_postgres(agents: int = 1, deadline: float | None = None) -> None:
    """Skip (fail under ``CI``) unless the server is reachable and can give *agents* agent
    processes their connections, plus one for the test: waiting for them (other test
    processes' agents stopping) until *deadline* (``time.monotonic()``), by default
    :data:`CONNECTION_WAIT_S` from now."""
    _reachable()
    need = agents * PER_AGENT + 1
    if deadline is None:
        deadline = time.monotonic() + CONNECTION_WAIT_S
    while True:
        short = [
            (what, limit, open_now, limit - open_now + 1)  # +1: the asking one is closed now
            for what, limit, open_now in _limits()
            if limit >= 0 and limit - open_now + 1 < need
        ]
        if not short:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    what, limit, open_now, free = short[0]
    cannot_run(
        f"this test needs {need} free connections to {_where()} ({agents} agent(s) x "
        f"{PER_AGENT} + 1), but {what} leaves {free} ({limit} allowed, {open_now - 1} "
        f"open) after {CONNECTION_WAIT_S:g} s of waiting; close other clients (see "
        "pg_stat_activity), raise the limit, run with -n 0, or point "
        "APCORE_A2A_TEST_POSTGRES_URL at another server"
    )


@contextlib.contextmanager
def _reserve(agents: int) -> Iterator[None]:
    """Hold *agents* agent processes' connections (and the test's one) for the block,
    against every test process on this machine (:func:`tokens`), then wait for the server
    to have them free (:func:`require_postgres`)."""
    _reachable()
    deadline = time.monotonic() + CONNECTION_WAIT_S
    with tokens(agents * PER_AGENT + 1, deadline, f"{agents} agent(s) x {PER_AGENT} + 1"):
        require_postgres(agents, deadline)
        yield


def token_budget() -> int:
    """How many connections of the server the test processes on this machine share: its
    ``max_connections`` (less the reserved ones) less :data:`_MARGIN`."""
    if not _budget:
        server = next(limit for what, limit, _ in _limits() if "max_connections" in what)
        _budget.append(max(server - _MARGIN, 1))
    return _budget[0]


@_held
def tokens(need: int, deadline: float, why: str = "") -> Iterator[None]:
    """Hold *need* of the :func:`token_budget` connections for the block, waiting until
    *deadline* (``time.monotonic()``) for other test processes to release theirs.

    A check of the server's free connections alone raced: four test processes each found
    29 free, and their agents together then opened more than the server takes. Each
    connection is a token, a lock file of ``$TMPDIR/apcore-a2a-test-postgres-HOST-PORT/``
    held by ``flock`` (which dies with its process: a killed run frees its tokens). A test
    takes its tokens all at once or none: two holding half of what each needs would wait
    for each other.
    """
    budget = token_budget()
    folder = Path(tempfile.gettempdir()) / f"apcore-a2a-test-postgres-{PG_HOST}-{PG_PORT}"
    folder.mkdir(mode=0o777, exist_ok=True)
    held: list[int] = []
    try:
        while need <= budget:
            for token in range(budget):
                if (fd := try_lock(folder / f"{token}.lock")) is None:
                    continue
                held.append(fd)
                if len(held) == need:
                    break
            if len(held) == need or time.monotonic() >= deadline:
                break
            while held:
                os.close(held.pop())
            time.sleep(0.25)
        if len(held) < need:
            cannot_run(
                f"this test needs {need} connections to {_where()} ({why}); the test "
                f"processes on this machine share {budget} (the server's max_connections "
                f"less {_MARGIN}), and others still held more than {budget - need} after "
                f"{CONNECTION_WAIT_S:g} s of waiting; run fewer test processes, or point "
                "APCORE_A2A_TEST_POSTGRES_URL at another server"
            )
        yield
    finally:
        for fd in held:
            os.close(fd)


def _url(database: str, pool_size: int | None, schema: str | None = None) -> str:
    # The schema goes last: tests read it back with ``url.rsplit("schema=", 1)``.
    query = []
    if pool_size is not None:
        query.append(f"pool_size={pool_size}")
    if schema is not None:
        query.append(f"schema={schema}")
    base = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"
    return f"{base}?{'&'.join(query)}" if query else base


@_held
def pg_schema_url(agents: int = 1, pool_size: int | None = POOL_SIZE) -> Iterator[str]:
    """A fresh schema in the test database for *agents* agent processes at once, dropped
    on exit; yields its URL (with ``?pool_size=`` *pool_size*, none when ``None``). The
    connections are held for the block (:func:`_reserve`)."""
    with _reserve(agents):
        schema = f"apcore_a2a_t_{uuid.uuid4().hex[:12]}"
        pg_execute(f"CREATE SCHEMA {schema}")
        try:
            yield _url(PG_DB, pool_size, schema)
        finally:
            pg_execute(f"DROP SCHEMA {schema} CASCADE")


@_held
def pg_database_url(agents: int = 1, pool_size: int | None = POOL_SIZE) -> Iterator[str]:
    """A fresh database of its own (its transaction counters count only its clients) for
    *agents* agent processes at once, dropped on exit; yields its URL. The connections are
    held for the block (:func:`_reserve`)."""
    with _reserve(agents):
        name = f"apcore_a2a_d_{uuid.uuid4().hex[:12]}"
        pg_execute(f"CREATE DATABASE {name}")
        try:
            yield _url(name, pool_size)
        finally:
            pg_execute(f"DROP DATABASE {name} WITH (FORCE)")


@_held
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
