"""Fixtures giving each test a fresh task store URL per backend.

PostgreSQL tests use the server at 127.0.0.1:5432 (database ``test``), each test in a
schema of its own that is dropped afterwards. When that server is unreachable the tests
are skipped, except under ``CI`` where they must run and therefore fail.
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

import pytest

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_DB = "test"
PG_USER = "postgres"


def _pg_reachable() -> bool:
    try:
        with socket.create_connection((PG_HOST, PG_PORT), timeout=1.0):
            return True
    except OSError:
        return False


def require_postgres() -> None:
    if _pg_reachable():
        return
    reason = f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT}"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the PostgreSQL storage tests")
    pytest.skip(f"{reason} (only skipped outside CI)")


def _pg_execute(sql: str) -> None:
    """Run one statement on the ``test`` database, off the (maybe running) test loop."""
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


@contextlib.contextmanager
def pg_schema_url() -> Iterator[str]:
    """A fresh schema in the ``test`` database, dropped on exit; yields its URL."""
    require_postgres()
    schema = f"apcore_a2a_t_{uuid.uuid4().hex[:12]}"
    _pg_execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{PG_DB}?schema={schema}"
    finally:
        _pg_execute(f"DROP SCHEMA {schema} CASCADE")


@contextlib.contextmanager
def pg_database_url() -> Iterator[str]:
    """A fresh database of its own (its transaction counters count only its clients),
    dropped on exit; yields its URL."""
    require_postgres()
    name = f"apcore_a2a_d_{uuid.uuid4().hex[:12]}"
    _pg_execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        _pg_execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """``postgresql://`` URL of a fresh, empty schema in the ``test`` database."""
    with pg_schema_url() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tasks.db'}"


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A task store URL for the parametrized *backend*."""
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest) -> str:
    """A SQL task store URL (SQLite file or PostgreSQL schema)."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))
