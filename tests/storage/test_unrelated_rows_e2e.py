"""A request reads the rows it is about, not the rest of the store (PostgreSQL, with and
without ``--cluster``; rows read as the database counts them: ``pg_stat_user_tables``,
``seq_tup_read + idx_tup_fetch``, in a database of the test's own).

* A new task in a context holding many tasks checks the context's owners with two index
  reads, however many tasks the context and the table hold.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from .._postgres import PG_HOST, PG_PORT, PG_USER, pg_database_url
from .._support import cli_server
from .test_cluster_write_path_e2e import FAST
from .test_write_path_e2e import V1, _body, _sql

PROBES = str(Path(__file__).resolve().parent / "probes")
#: rows a request about a few rows may read at most (the store held about 100 times more)
FEW = 200


@contextlib.contextmanager
def _server(url: str, mode: str) -> Iterator[str]:
    args = ["--extensions-dir", PROBES, "--task-store", url, "--log-level", "warning"]
    args += ["--cluster"] * (mode == "cluster")
    with cli_server(args, env=FAST) as (base, _proc):
        yield base


@pytest.fixture(params=["single", "cluster"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def database() -> Iterator[tuple[str, str]]:
    """A database of the test's own: (store URL, database name)."""
    with pg_database_url() as url:
        yield url, url.rsplit("/", 1)[1].split("?")[0]


async def _rows_read(database: str, table: str) -> int:
    """Rows of *table* read so far, once every server connection has reported its reads.

    A backend reports its counts when it goes idle, at most once a second: the count is
    taken once it has not moved for 2.5 s (a query, not a timing assertion).
    """
    sql = (
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
        "FROM pg_stat_user_tables WHERE relname = $1"
    )
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
    try:
        last, same = -1, 0
        for _ in range(60):
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            now = int(await conn.fetchval(sql, table))
            same = same + 1 if now == last else 0
            if same == 5:
                return now
            last = now
            await asyncio.sleep(0.5)
        raise AssertionError(f"reads of {table} did not settle")
    finally:
        await conn.close()


def _in_context(context_id: str) -> dict[str, Any]:
    body = _body("probe.chunks", {"count": 1, "size": 8, "delay": 0})
    body["params"]["message"]["contextId"] = context_id  # type: ignore[index]
    return body


async def test_a_new_task_in_a_big_context_reads_few_rows(
    database: tuple[str, str], mode: str
) -> None:
    url, name = database
    with _server(url, mode) as base:
        async with httpx.AsyncClient(headers=V1, timeout=60) as http:
            answer = (await http.post(base + "/", json=_in_context("big-context"))).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            [[owner]] = await _sql(url, "SELECT owner FROM tasks")
            # 20,000 earlier tasks of this caller in the context, 20,000 of others elsewhere.
            rows = (
                "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, "
                "protocol_version) SELECT '{p}' || g, {context}, 'task', {owner}, "
                "now() - g * interval '1 second', "
                "'{{\"state\": \"TASK_STATE_COMPLETED\"}}', '1.0' "
                "FROM generate_series(1, 20000) g"
            )
            await _sql(
                url,
                rows.format(p="mine-", context="'big-context'", owner=f"'{owner}'"),
                rows.format(p="theirs-", context="'c-' || g", owner="'u-' || (g % 100)"),
                "ANALYZE tasks",
            )
            before = await _rows_read(name, "tasks")
            answer = (await http.post(base + "/", json=_in_context("big-context"))).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            read = await _rows_read(name, "tasks") - before
    assert read <= FEW, f"a new task in the context read {read} rows of tasks"
