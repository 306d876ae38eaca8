"""Fixtures giving each test a fresh task store URL per backend.

PostgreSQL tests use the server of ``tests/_postgres.py`` (``APCORE_A2A_TEST_POSTGRES_URL``),
each test in a schema of its own that is dropped afterwards, skipped with the reason when the
server cannot give the test its connections (failed under ``CI``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .._postgres import pg_schema_url

#: store sets a storage test opens at once (test_contract's three replicas)
STORE_SETS = 3


@pytest.fixture
def pg_url() -> Iterator[str]:
    """``postgresql://`` URL of a fresh, empty schema in the test database."""
    with pg_schema_url(agents=STORE_SETS) as url:
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
