"""An agent counts the PostgreSQL connections it will hold before it serves.

Per process: the pool (``?pool_size=``, 20 by default), the writer's connection and, in
cluster mode with wake-ups, the listening one; times the workers. A server that cannot
take them all is refused at start with one line, not found out under load.
"""

from __future__ import annotations

import pytest

from apcore_a2a.storage import StoreUnavailableError, open_stores

from .._support import cli
from ._helpers import settings

pytestmark = pytest.mark.postgres


async def test_a_pool_the_server_cannot_take_stops_the_start_with_one_line(pg_url: str) -> None:
    code, out, err = await cli(
        "serve",
        "--extensions-dir",
        "examples/extensions",
        "--task-store",
        f"{pg_url}&pool_size=500",
    )
    assert code == 3, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, err
    assert "1 worker(s) x 501 (pool 500 + writer) = 501" in lines[0]
    assert "max_connections" in lines[0]
    assert "Traceback" not in err


async def test_the_workers_count_in_cluster_mode(pg_url: str) -> None:
    stores = open_stores(pg_url, settings(cluster=True, workers=8))
    with pytest.raises(
        StoreUnavailableError, match=r"8 worker\(s\) x 22 \(pool 20 \+ writer \+ listener\) = 176"
    ):
        await stores.start()
    await stores.aclose()


async def test_a_pool_that_fits_starts(pg_url: str) -> None:
    stores = open_stores(f"{pg_url}&pool_size=4", settings(cluster=True, workers=2))
    await stores.start()
    await stores.ping()
    await stores.aclose()


def test_pool_size_must_be_a_small_whole_number() -> None:
    for bad in ("0", "x", "1001", "-1"):
        with pytest.raises(ValueError, match="pool_size must be a whole number"):
            open_stores(f"postgresql://u@h/db?pool_size={bad}", settings())
