"""A request reads the rows it is about, not the rest of the store (PostgreSQL, with and
without ``--cluster``; rows read as the database counts them: ``pg_stat_user_tables``,
``seq_tup_read + idx_tup_fetch``, in a database of the test's own, once the agents that
read them have stopped).

* Resuming a subscription (``Last-Event-ID``) to a long task reads the events after that
  id, not the task's earlier events nor the events of every task written after it.
* The safety poll of a cluster replica reads the latest event of each task followed
  there, not every event of those tasks.
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

from apcore_a2a import A2AServerFactory

from .._postgres import PG_HOST, PG_PORT, PG_USER, pg_database_url
from .._support import ROOT, TLS, cli_server, free_port, sse_frames, threaded_server
from .test_cluster_write_path_e2e import FAST
from .test_write_path_e2e import V1, _body, _sql

PROBES = str(Path(__file__).resolve().parent / "probes")
BENCH = str(ROOT / "benchmarks" / "extensions")
#: other tasks' events the store holds meanwhile (about 8 MB of table)
UNRELATED = 50_000
#: rows a request about a few rows may read at most (the store held about 100 times more)
FEW = 200


@contextlib.contextmanager
def _server(url: str, mode: str) -> Iterator[str]:
    args = ["--extensions-dir", PROBES, "--task-store", url, "--log-level", "warning"]
    args += ["--cluster"] * (mode == "cluster")
    with cli_server(args, env=FAST) as (base, _proc):
        yield base


@contextlib.contextmanager
def _agent(url: str, mode: str) -> Iterator[str]:
    """The agent of :func:`_server` in the test's own process (under uvicorn in a thread):
    for the agents a count waits to stop, a start without an interpreter's (imports)."""
    port = free_port()
    app, _card = A2AServerFactory(
        environ=dict(FAST),
        port=port,
        extensions_dirs=(PROBES,),
        task_store=url,
        cluster=mode == "cluster",
    ).create()
    with threaded_server(app, port=port) as base:
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
    """Rows of *table* read so far, by clients that have all disconnected.

    A backend reports its counts when it goes idle, at most once a second, else after 10
    s idle (PostgreSQL 15), but always as it exits, before it leaves
    ``pg_stat_activity``: once no other client is connected to *database* (the tests
    stop their agents first), the count is final.
    """
    others = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    sql = (
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
        "FROM pg_stat_user_tables WHERE relname = $1"
    )
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
    try:
        # A hang guard: a closed connection's backend exits within milliseconds.
        for _ in range(1200):
            if not await conn.fetchval(others, database):
                await conn.execute("SELECT pg_stat_clear_snapshot()")
                return int(await conn.fetchval(sql, table))
            await asyncio.sleep(0.05)
        raise AssertionError(f"clients of {database} still connected (1,200 looks)")
    finally:
        await conn.close()


async def _start_reads(url: str, mode: str, database: str, table: str) -> int:
    """Rows of *table* an agent reads to start and stop alone (recovery reads the tasks a
    stopped agent left running), to take off a request's."""
    before = await _rows_read(database, table)
    with _agent(url, mode):
        pass
    return await _rows_read(database, table) - before


def _stream(count: int) -> dict[str, Any]:
    body = _body("probe.chunks", {"count": count, "size": 8, "delay": 0})
    body["method"] = "SendStreamingMessage"
    return body


async def test_resuming_a_long_task_reads_only_the_events_after_the_id(
    database: tuple[str, str], mode: str
) -> None:
    url, name = database
    with _server(url, mode) as base:
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            ids: list[str] = []
            task_id = ""
            async with http.stream("POST", base + "/", json=_stream(500)) as response:
                async for event_id, payload in sse_frames(response):
                    task_id = payload["result"].get("task", {}).get("id", task_id)
                    ids.append(event_id or "")
    # Other tasks' events, written after this task's (the table's newest rows).
    await _sql(
        url,
        "INSERT INTO task_events (task_id, owner, task_version, event_data) "
        f"SELECT 'other-' || (g % 5000), 'someone', g / 5000 + 1, '\\x00'::bytea "
        f"FROM generate_series(1, {UNRELATED}) g",
        "ANALYZE task_events",
    )
    before = await _rows_read(name, "task_events")
    # A new agent, stopped before the count: its start and stop are counted too.
    with _agent(url, mode) as base:
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask"}
            body["params"] = {"id": task_id}
            headers = {"Last-Event-ID": ids[-11]}  # ten events to go
            got = []
            async with http.stream("POST", base + "/", json=body, headers=headers) as response:
                async for event_id, _payload in sse_frames(response):
                    got.append(event_id)
            assert got == ids[-10:]
    read = await _rows_read(name, "task_events") - before
    assert read <= FEW, f"resuming 10 events read {read} rows of task_events"


def _in_context(context_id: str) -> dict[str, Any]:
    body = _body("probe.chunks", {"count": 1, "size": 8, "delay": 0})
    body["params"]["message"]["contextId"] = context_id  # type: ignore[index]
    return body


async def test_a_new_task_in_a_big_context_reads_few_rows(
    database: tuple[str, str], mode: str
) -> None:
    url, name = database
    with _server(url, mode) as base:
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
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
    start = await _start_reads(url, mode, name, "tasks")
    before = await _rows_read(name, "tasks")
    # A new agent, stopped before the count: what it read beyond a start and a stop.
    with _agent(url, mode) as base:
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            answer = (await http.post(base + "/", json=_in_context("big-context"))).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    read = await _rows_read(name, "tasks") - before - start
    assert read <= FEW, f"a new task in the context read {read} rows of tasks"


def _answer(task_id: str, turn: int) -> dict[str, Any]:
    body = _body("bench.turns", {"turn": turn})
    message = body["params"]["message"]  # type: ignore[index]
    message["taskId"] = task_id
    del message["metadata"]
    return body


async def _scans_and_rows(database: str) -> tuple[int, int]:
    sql = (
        "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0), "
        "coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
        "FROM pg_stat_user_tables WHERE relname = 'task_events'"
    )
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=database)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        scans, rows = await conn.fetchrow(sql)
        return int(scans), int(rows)
    finally:
        await conn.close()


async def test_the_safety_poll_reads_the_latest_event_of_each_task(
    database: tuple[str, str],
) -> None:
    url, name = database
    args = ["--extensions-dir", BENCH, "--task-store", url, "--cluster", "--log-level", "warning"]
    # Without wake-ups the poll runs every cluster_poll_interval (0.1 s here).
    env = {**FAST, "A2A_CLUSTER_WAKEUPS": "false"}
    with cli_server(args, env=env) as (base, _proc):
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            reply = await http.post(base + "/", json=_body("bench.turns", {"turns": 101}))
            task_id = reply.json()["result"]["task"]["id"]
            for turn in range(1, 101):
                reply = await http.post(base + "/", json=_answer(task_id, turn))
            assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            # Each turn's whole-task event replaced the task's earlier ones; a store the
            # release before that wrote holds them all: hundreds of events of a waiting
            # task, under the seqs the replacements freed, the latest one still its own.
            await _sql(
                url,
                "INSERT INTO task_events (seq, task_id, owner, task_version, event_data) "
                "SELECT g, e.task_id, e.owner, e.task_version, e.event_data "
                "FROM task_events e, generate_series(1, 400) g "
                "WHERE e.seq = (SELECT max(seq) FROM task_events) "
                "AND NOT EXISTS (SELECT 1 FROM task_events f WHERE f.seq = g)",
            )
            [[events]] = await _sql(url, "SELECT count(*) FROM task_events")
            assert int(events) >= 300  # type: ignore[call-overload]
            await _sql(url, "ANALYZE task_events")
            body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask"}
            body["params"] = {"id": task_id}
            async with http.stream("POST", base + "/", json=body) as response:
                frames = sse_frames(response)
                await anext(frames)  # the task as it waits: the subscription is open
                # A backend reports a query's scans and rows together, at least once a
                # second while it works: their ratio over a few seconds is per poll.
                await asyncio.sleep(2)
                scans, rows = await _scans_and_rows(name)
                await asyncio.sleep(4)  # polls run meanwhile (about 40)
                more_scans, more_rows = await _scans_and_rows(name)
                await frames.aclose()
    polls = more_scans - scans
    assert polls >= 3
    assert more_rows - rows <= 2 * polls, f"{polls} polls read {more_rows - rows} rows"
