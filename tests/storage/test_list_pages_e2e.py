"""A page of ``ListTasks`` reads its own rows, however many tasks the caller holds
(PostgreSQL; rows of ``tasks`` read as the database
counts them: ``pg_stat_user_tables``, ``seq_tup_read + idx_tup_fetch``).

The caller holds 2,000 tasks (and three without a timestamp, and pairs sharing one),
100 other callers 20,000; it
pages through them all in the list's order, and its second page, unfiltered and filtered
by ``contextId``, reads a few rows more than it returns. Before ``storage/listing.py`` the
SDK's query read every task of the caller twice for each page (4,000 rows).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

from .._postgres import PG_HOST, PG_PORT, PG_USER
from .test_unrelated_rows_e2e import _rows_read, _server, database  # noqa: F401
from .test_write_path_e2e import V1, _body, _sql

#: the caller's tasks
TASKS = 2000
PAGE = 50
#: rows a page of PAGE tasks may read at most (its rows, the next one, a few of the
#: agent's own; the count reads the index alone once the table is vacuumed)
BOUND = 3 * PAGE

_ROWS = (
    "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, history, "
    "protocol_version) SELECT 'mine-' || lpad(g::text, 5, '0'), "
    "CASE WHEN g % 4 = 0 THEN 'ctx-big' ELSE 'ctx-' || g END, 'task', '{owner}', "
    # pairs of tasks share a timestamp: the page token orders them by id
    "timestamp '2026-01-01' - (g / 2) * interval '1 second', "
    "'{{\"state\": \"TASK_STATE_COMPLETED\"}}', '[]', '1.0' FROM generate_series(1, {n}) g"
)
_OTHERS = (
    "INSERT INTO tasks (id, context_id, kind, owner, last_updated, status, history, "
    "protocol_version) SELECT 'theirs-' || g, 'c-' || g, 'task', 'u-' || (g % 100), "
    "now() - g * interval '1 second', '{\"state\": \"TASK_STATE_COMPLETED\"}', '[]', '1.0' "
    "FROM generate_series(1, 20000) g"
)
_UNDATED = (
    "INSERT INTO tasks (id, context_id, kind, owner, status, history, protocol_version) "
    "SELECT 'undated-' || g, 'ctx-u', 'task', '{owner}', "
    "'{{\"state\": \"TASK_STATE_COMPLETED\"}}', '[]', '1.0' FROM generate_series(1, 3) g"
)


def _list(page_token: str = "", **params: Any) -> dict[str, Any]:
    params = {"pageSize": PAGE, **params}
    if page_token:
        params["pageToken"] = page_token
    return {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}


async def _vacuum(name: str) -> None:
    """Mark the table's pages all-visible, as autovacuum does (the count reads the
    index alone then)."""
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=name)
    try:
        await conn.execute("VACUUM ANALYZE tasks")
    finally:
        await conn.close()


async def _page(http: httpx.AsyncClient, base: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = (await http.post(base + "/", json=body)).json()
    assert "result" in answer, answer
    return dict(answer["result"])


async def test_a_page_reads_its_rows_not_every_task_of_the_caller(
    database: tuple[str, str],  # noqa: F811
) -> None:
    url, name = database
    # Single mode only: with --cluster the same listing reads the same rows (the SDK's
    # store under the versioned one; benchmarks/pages.py measures both), and each
    # measurement waits 11 s for PostgreSQL's counters to settle.
    with _server(url, "single") as base:
        async with httpx.AsyncClient(headers=V1, timeout=60) as http:
            answer = (
                await http.post(
                    base + "/", json=_body("probe.chunks", {"count": 1, "size": 8, "delay": 0})
                )
            ).json()
            first_id = answer["result"]["task"]["id"]
            [[owner]] = await _sql(url, "SELECT owner FROM tasks")
            await _sql(
                url, _ROWS.format(owner=owner, n=TASKS), _UNDATED.format(owner=owner), _OTHERS
            )
            await _vacuum(name)

            # The whole list, in its order: newest first, ties by id, undated last.
            seen: list[str] = []
            token = ""
            while True:
                page = await _page(http, base, _list(token))
                assert page["totalSize"] == TASKS + 4
                seen += [task["id"] for task in page["tasks"]]
                token = page.get("nextPageToken", "")
                if not token:
                    break
            dated = sorted(
                (f"mine-{g:05d}" for g in range(1, TASKS + 1)),
                key=lambda i: (int(i[5:]) // 2, [-ord(c) for c in i]),
            )
            assert seen == [first_id, *dated, "undated-3", "undated-2", "undated-1"]

            second = _list((await _page(http, base, _list()))["nextPageToken"])
            before = await _rows_read(name, "tasks")
            page = await _page(http, base, second)
            read = await _rows_read(name, "tasks") - before
            assert len(page["tasks"]) == PAGE

            in_context = _list(contextId="ctx-big")
            token = (await _page(http, base, in_context))["nextPageToken"]
            in_context = _list(token, contextId="ctx-big")
            before = await _rows_read(name, "tasks")
            page = await _page(http, base, in_context)
            read_in_context = await _rows_read(name, "tasks") - before
            assert [t["contextId"] for t in page["tasks"]] == ["ctx-big"] * PAGE
            assert page["totalSize"] == TASKS // 4
    assert read <= BOUND, f"the second page read {read} rows of tasks"
    assert read_in_context <= BOUND, f"the second page of a context read {read_in_context}"
