"""A page of ``ListTasks`` reads its own rows, however many tasks the caller holds
(PostgreSQL; rows of ``tasks`` read as the database counts them: ``pg_stat_user_tables``,
``seq_tup_read + idx_tup_fetch``, once the agent that read them has stopped).

The caller holds 2,000 tasks (and three without a timestamp, and pairs sharing one; one
in five failed, half of those stored by an older agent as ``failed``), 100 other callers
20,000; it pages through them all in the list's order, and its second page, unfiltered
and filtered by ``contextId``, reads a few rows more than it returns. Before
``storage/listing.py`` the SDK's query read every task of the caller twice for each page
(4,000 rows). Filtered by ``status`` (and by both), the pages give the failed tasks of both
spellings in one order, and the second page reads its rows and the failed ones its count
reads; before ``ix_apcore_a2a_tasks_owner_state_updated_id`` it read the caller's tasks
in order until it had its rows, and every task of the caller for the count. Each second
page is read by a new agent, on a new connection (see the test).
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import ListTasksRequest
from sqlalchemy import text

from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.listing import TaskPages
from tests._support import TLS

from .._postgres import PG_HOST, PG_PORT, PG_USER
from ._helpers import ctx, make_task
from .test_unrelated_rows_e2e import (  # noqa: F401
    _agent,
    _rows_read,
    _server,
    _start_reads,
    database,
)
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
    'CASE g % 10 WHEN 2 THEN \'{{"state": "TASK_STATE_FAILED"}}\' '
    'WHEN 6 THEN \'{{"state": "failed"}}\' '
    "ELSE '{{\"state\": \"TASK_STATE_COMPLETED\"}}' END::json, '[]', "
    "CASE g % 10 WHEN 6 THEN '0.3' ELSE '1.0' END FROM generate_series(1, {n}) g"
)
#: the caller's failed tasks: ``TASK_STATE_FAILED`` and an older agent's ``failed``
FAILED = {f"mine-{g:05d}" for g in range(1, TASKS + 1) if g % 10 in (2, 6)}
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
    # store under the versioned one; benchmarks/pages.py measures both).
    with _server(url, "single") as base:
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
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

            # Filtered by status, and by context and status: the same order, both spellings.
            for filters, expected in (
                ({"status": "TASK_STATE_FAILED"}, [i for i in dated if i in FAILED]),
                (
                    {"status": "TASK_STATE_FAILED", "contextId": "ctx-big"},
                    [i for i in dated if i in FAILED and int(i[5:]) % 4 == 0],
                ),
            ):
                seen, token = [], ""
                while True:
                    page = await _page(http, base, _list(token, **filters))
                    assert page["totalSize"] == len(expected)
                    assert {t["status"]["state"] for t in page["tasks"]} <= {"TASK_STATE_FAILED"}
                    seen += [task["id"] for task in page["tasks"]]
                    token = page.get("nextPageToken", "")
                    if not token:
                        break
                assert seen == expected, filters

            # The second page of each listing, each read by an agent of its own.
            seconds = []
            for filters in ({}, {"contextId": "ctx-big"}, {"status": "TASK_STATE_FAILED"}):
                token = (await _page(http, base, _list(**filters)))["nextPageToken"]
                seconds.append(_list(token, **filters))
    # A backend reports its reads as it exits: each agent stops before its count, and what
    # it read beyond a start and a stop is its page's. Each page is its agent's first
    # statement of the kind on a new connection: PostgreSQL's first (custom) plans, which
    # read and sorted every task of the caller past the position before each page turned
    # sorting off for its transaction (1,953 rows; 750 by status with the row comparison
    # alone).
    start = await _start_reads(url, "single", name, "tasks")
    reads, pages = [], []
    for second in seconds:
        before = await _rows_read(name, "tasks")
        with _agent(url, "single") as base:
            async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
                pages.append(await _page(http, base, second))
        reads.append(await _rows_read(name, "tasks") - before - start)
    read, read_in_context, read_by_status = reads
    page, in_context, by_status = pages
    assert len(page["tasks"]) == PAGE
    assert [t["contextId"] for t in in_context["tasks"]] == ["ctx-big"] * PAGE
    assert in_context["totalSize"] == TASKS // 4
    assert len(by_status["tasks"]) == PAGE
    assert read <= BOUND, f"the second page read {read} rows of tasks"
    # The count under a status filter reads the matching rows (PostgreSQL reads no
    # expression from an index); the page its own.
    bound = BOUND + len(FAILED)
    assert read_by_status <= bound, f"the second page of a status read {read_by_status}"
    assert read_in_context <= BOUND, f"the second page of a context read {read_in_context}"


@pytest.mark.postgres
async def test_a_page_turns_sorting_off_for_its_own_transaction_only(pg_url: str) -> None:
    """The pool's connection a page read on plans every later statement as before."""
    engine = create_engine(parse_store_url(pg_url))
    try:
        store = DatabaseTaskStore(engine)
        await store.initialize()
        await store.save(make_task(), ctx())
        pid, setting = text("SELECT pg_backend_pid()"), text("SHOW enable_sort")
        async with engine.connect() as conn:
            before = (await conn.execute(pid)).scalar_one()
        page = await TaskPages(store).list(ListTasksRequest(), ctx())
        assert len(page.tasks) == 1
        async with engine.connect() as conn:  # the pool's one connection, the page's
            assert (await conn.execute(pid)).scalar_one() == before
            assert (await conn.execute(setting)).scalar_one() == "on"
    finally:
        await engine.dispose()
