"""A replica paused past the replica timeout: its task is failed elsewhere, and its module
stops when it wakes.

Replica A runs ``probe.work`` (which checks its cancel token) and is frozen with SIGSTOP
(a long GC pause, a frozen VM). Replica B finds A dead and fails the task ("Interrupted
by server restart"). When A wakes, its run must not go on with a module whose task is
already final elsewhere: the result can never be stored, and a caller who saw the task
fail may have sent the work again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, ServerProcess, cli_server
from .test_replicas_e2e import PROBES, _pair

V10 = {"A2A-Version": "1.0"}
#: generous bound on any one wait of this test (no timing is asserted)
WAIT = 90.0
#: Short enough for a quick test, and lenient: a replica judges others only after a
#: steady run of its own beats, which a busy machine can break at shorter intervals.
TIMING = ["--cluster-heartbeat-interval", "0.5", "--cluster-replica-timeout", "4"]


async def _rpc(url: str, method: str, params: dict[str, object]) -> dict[str, object]:
    answer = await _answer(url, method, params)
    assert "result" in answer, answer
    return dict(answer["result"])


async def _answer(url: str, method: str, params: dict[str, object]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=WAIT, verify=TLS) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return dict((await http.post(url + "/", json=body, headers=V10)).json())


async def _start_work(url: str, journal: Path) -> str:
    """The id of a task running ``probe.work`` (60 s, journaled to *journal*) at *url*."""
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"journal": str(journal), "seconds": 60}}],
        "metadata": {"skillId": "probe.work"},
    }
    params = {"message": message, "configuration": {"returnImmediately": True}}
    return str((await _rpc(url, "SendMessage", params))["task"]["id"])  # type: ignore[index]


def _pg_replicas(
    stack: contextlib.ExitStack,
) -> tuple[str, tuple[str, ServerProcess], str]:
    """A fresh schema's URL, replica A (its URL and process) and replica B's URL on it."""
    url = stack.enter_context(pg_schema_url(agents=2))
    args = ["--extensions-dir", PROBES, "--task-store", url, "--cluster", *TIMING]
    env = {"A2A_CLUSTER_POLL_INTERVAL": "0.1"}
    a = stack.enter_context(cli_server(args, env=env))
    b, _ = stack.enter_context(cli_server(args, env=env))
    return url, a, b


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


def _pause_between_writes(pid: int, database: Path) -> None:
    """SIGSTOP *pid*, again until it holds no write lock on the SQLite *database*: a
    process paused holding it stalls every process on the file until it wakes (SQLite
    has no server to end its transaction; ``docs/storage.md``)."""
    for _ in range(100):
        os.kill(pid, signal.SIGSTOP)
        probe = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:  # "database is locked": paused mid-write
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            probe.close()
    raise AssertionError("the replica held the write lock at every pause")


async def paused_mid_write(
    conn: asyncpg.Connection,
    a: str,
    pid: int,
    task_id: str,
    failed_on_b: Callable[[], Awaitable[bool]],
) -> dict[str, Any]:
    """Hold the task's row on *conn*, let replica A's cancel write wait for it, pause A
    (process *pid*), let go: A's transaction now holds the row, idle, as a replica paused
    mid-write does; then wait until B fails the task, wake A, and return its cancel's
    answer (A's cancel lost its transaction: a result or a typed error, never an internal
    one, the callers check)."""
    held = conn.transaction()
    await held.start()
    await conn.execute("SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", task_id)
    cancel = asyncio.ensure_future(_answer(a, "CancelTask", {"id": task_id}))
    mine = await conn.fetchval("SELECT pg_backend_pid()")
    blocked = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
    # Read on a connection of its own: *conn*'s open transaction sees pg_stat_activity as
    # at its first look, so a connection A opened later would never be seen waiting.
    probe = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)

    async def a_waits_for_us() -> bool:
        return bool(await probe.fetchval(blocked, mine))

    try:
        await _until(a_waits_for_us, "A's cancel never wrote the task")
        os.kill(pid, signal.SIGSTOP)
        try:
            await held.rollback()
            await _until(failed_on_b, "B never failed the task A holds locked")
        finally:
            os.kill(pid, signal.SIGCONT)
        return await cancel
    finally:
        cancel.cancel()
        await probe.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_woken_replica_stops_the_module_of_a_task_failed_elsewhere(
    backend: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    with _pair(backend, tmp_path, *TIMING, extensions=PROBES) as ((a, proc_a), (b, _)):
        task_id = await _start_work(a, journal)

        def said() -> list[str]:
            return journal.read_text().split()[::2] if journal.exists() else []

        async def started() -> bool:
            return "started" in said()

        async def failed_on_b() -> bool:
            task = await _rpc(b, "GetTask", {"id": task_id})
            return task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]

        async def module_ended() -> bool:
            return len(said()) > 1

        await _until(started, "the module never started")
        if backend == "sqlite":
            _pause_between_writes(proc_a.pid, tmp_path / "tasks.db")
        else:  # paused mid-write, the server ends A's transaction (the test below)
            os.kill(proc_a.pid, signal.SIGSTOP)
        try:
            await _until(failed_on_b, "B never failed the paused replica's task")
        finally:
            os.kill(proc_a.pid, signal.SIGCONT)
        await _until(module_ended, f"the module never ended: {said()}")
        assert said() == ["started", "canceled"]


async def test_a_replica_paused_inside_a_transaction_does_not_hold_its_task(
    tmp_path: Path,
) -> None:
    """PostgreSQL: A is paused in the middle of a write (its transaction idle, the task's
    rows locked); B still fails A's task, since the server ends a transaction left idle
    for a replica timeout. Before, B's write waited for A's lock until A woke."""
    journal = tmp_path / "journal.txt"
    with contextlib.ExitStack() as stack:
        url, (a, proc_a), b = _pg_replicas(stack)
        task_id = await _start_work(a, journal)

        async def working_on_a() -> bool:
            task = await _rpc(a, "GetTask", {"id": task_id})
            return task["status"]["state"] == "TASK_STATE_WORKING"  # type: ignore[index]

        async def failed_on_b() -> bool:
            task = await _rpc(b, "GetTask", {"id": task_id})
            return task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]

        await _until(working_on_a, "the task never ran on A")
        schema = make_url(url).query["schema"]
        conn = await asyncpg.connect(
            host=PG_HOST,
            port=PG_PORT,
            user=PG_USER,
            database=PG_DB,
            server_settings={"search_path": str(schema)},
        )
        try:
            answer = await paused_mid_write(conn, a, proc_a.pid, task_id, failed_on_b)
        finally:
            await conn.close()
        assert answer.get("error", {}).get("code") != -32603, answer
        task = await _rpc(b, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]


async def test_a_replica_paused_in_the_middle_of_a_statement_does_not_hold_its_task(
    tmp_path: Path,
) -> None:
    """PostgreSQL: a session of A's (named by A's replica id, as A's own are) holds the
    task's row and waits in the middle of a statement (asyncpg prepares with Parse,
    Describe and Flush, then sends the Bind: the server waits ``active``, which neither
    ``idle_in_transaction_session_timeout`` nor ``statement_timeout`` ends), and A is
    paused. B ends the dead replica's sessions and fails its task. Before, B's write
    waited for that lock until A woke (1 pause in 6 met this in CI's paused-replica test)."""
    journal = tmp_path / "journal.txt"
    with contextlib.ExitStack() as stack:
        url, (a, proc_a), b = _pg_replicas(stack)
        task_id = await _start_work(a, journal)

        async def failed_on_b() -> bool:
            task = await _rpc(b, "GetTask", {"id": task_id})
            return task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]

        schema = str(make_url(url).query["schema"])
        where = {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "database": PG_DB}
        admin = await asyncpg.connect(**where, server_settings={"search_path": schema})
        try:
            replica = await admin.fetchval(
                "SELECT replica_id FROM apcore_a2a_replicas WHERE pid = $1", proc_a.pid
            )
            names = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
            name = f"apcore-a2a replica {replica}"
            assert await admin.fetchval(names, name) > 0  # A's own sessions carry it
            conn = await asyncpg.connect(
                **where, server_settings={"search_path": schema, "application_name": name}
            )
            held = conn.transaction()
            await held.start()
            await conn.execute("SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE", task_id)
            await conn.prepare("SELECT $1::int + 1")  # no Sync: the server waits for a Bind
            state = "SELECT state FROM pg_stat_activity WHERE pid = $1"
            assert await admin.fetchval(state, conn.get_server_pid()) == "active"
            os.kill(proc_a.pid, signal.SIGSTOP)
            try:
                await _until(failed_on_b, "B never failed the task A's session holds locked")
            finally:
                os.kill(proc_a.pid, signal.SIGCONT)
            assert conn.is_closed()  # B ended it
        finally:
            await admin.close()
