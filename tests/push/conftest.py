"""SQL task store URLs for the push tests: a SQLite file, or a fresh PostgreSQL schema.

PostgreSQL is the server at 127.0.0.1:5432 (database ``test``). When it is unreachable the
PostgreSQL cases are skipped, except under ``CI`` where they must run and so fail.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}


def _pg_run(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(**PG)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    # The test's own loop may be running; use a private one on another thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


def _pg_schema() -> Iterator[str]:
    try:
        socket.create_connection((PG["host"], PG["port"]), timeout=1.0).close()
    except OSError:
        reason = f"PostgreSQL not reachable at {PG['host']}:{PG['port']}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must run the PostgreSQL push tests")
        pytest.skip(f"{reason} (only skipped outside CI)")
    schema = f"apcore_a2a_push_{uuid.uuid4().hex[:12]}"
    _pg_run(f"CREATE SCHEMA {schema}")
    try:
        yield (
            f"postgresql://{PG['user']}@{PG['host']}:{PG['port']}/{PG['database']}?schema={schema}"
        )
    finally:
        _pg_run(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A task store URL on SQLite or PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        yield from _pg_schema()


@pytest.fixture
def pg_store() -> Iterator[str]:
    """A task store URL on PostgreSQL (cluster mode across replicas)."""
    yield from _pg_schema()
