"""SQL task store URLs for the push tests: a SQLite file, or a fresh PostgreSQL schema.

PostgreSQL is the server of ``tests/_postgres.py``; when it cannot give a test its
connections the PostgreSQL cases are skipped with the reason, except under ``CI`` where
they must run and so fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .._postgres import pg_schema_url, store_url


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A task store URL on SQLite or PostgreSQL (one agent at a time)."""
    with store_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def pg_store() -> Iterator[str]:
    """A task store URL on PostgreSQL (cluster mode across two replicas)."""
    with pg_schema_url(agents=2) as url:
        yield url
