"""A database served without ``--cluster`` has one process; ``--cluster`` processes share it.

The startup step of a process without ``--cluster`` fails every ``submitted``/``working``
task in the database (docs/storage.md, *Restarts*): a second process on the same database
would fail the first one's running tasks while their modules still run. So it refuses to
start, before it touches any task (SQLite: a lock on ``<database>.lock``; PostgreSQL: an
advisory lock per schema, on a connection of its own). The OS or the server releases
the lock when its process dies: a restart after ``kill -9`` starts at once.

In-process store sets are faithful here: both locks belong to an open file or to a
session, not to a process, so two store sets of one process exclude each other as two
processes do. The end-to-end tests run real ``serve`` processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

from apcore_a2a.storage import StoreUnavailableError, open_stores
from apcore_a2a.storage._owner import _KEY, LOCK_APPLICATION
from apcore_a2a.storage.migrations import upgrade_database
from tests._sdk import request

from .._postgres import pg_schema_url
from .._support import cli_server, free_port, run_python
from ._a2a import EXTENSIONS, client, send
from ._helpers import make_task, settings
from .test_recovery import put, state_of

SINGLE_HELD = "another apcore-a2a process serves this database without --cluster"
CLUSTER_HELD = "apcore-a2a processes serve this database with --cluster"


async def test_second_single_process_is_refused_and_touches_nothing(sql_url: str) -> None:
    first = open_stores(sql_url, settings())
    await first.start()
    running = make_task(TaskState.TASK_STATE_WORKING)
    await put(first, running)
    second = open_stores(sql_url, settings())
    try:
        with pytest.raises(StoreUnavailableError) as refused:
            await second.start()
        said = str(refused.value)
        assert SINGLE_HELD in said
        assert "stop it, use --cluster on every process, or give each its own database" in said
        assert sql_url.split("?")[0].split("/")[-1] in said  # names the database
        assert (await state_of(first, running.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await second.aclose()
        await first.aclose()
    # Closed, the first lets the next one in (whose startup step then fails the task).
    third = open_stores(sql_url, settings())
    try:
        await third.start()
        assert (await state_of(third, running.id)).status.state == TaskState.TASK_STATE_FAILED
    finally:
        await third.aclose()


async def test_single_and_cluster_refuse_each_other(sql_url: str) -> None:
    single = open_stores(sql_url, settings())
    await single.start()
    cluster = open_stores(sql_url, settings(cluster=True))
    try:
        with pytest.raises(StoreUnavailableError, match=SINGLE_HELD):
            await cluster.start()
    finally:
        await cluster.aclose()
        await single.aclose()

    replicas = [open_stores(sql_url, settings(cluster=True)) for _ in range(2)]
    try:
        for replica in replicas:  # cluster processes share the database
            await replica.start()
        running = make_task(TaskState.TASK_STATE_WORKING)
        await put(replicas[0], running)
        late = open_stores(sql_url, settings())
        try:
            with pytest.raises(StoreUnavailableError, match=CLUSTER_HELD):
                await late.start()
        finally:
            await late.aclose()
        assert (await state_of(replicas[1], running.id)).status.state == (
            TaskState.TASK_STATE_WORKING
        )
        # An admin command is not refused by a serving cluster.
        assert (await upgrade_database(sql_url))[0].startswith("database: ")
    finally:
        for replica in replicas:
            await replica.aclose()


async def test_each_postgresql_schema_has_its_own_owner() -> None:
    async with pg_schema_url(agents=2) as a, pg_schema_url(agents=2) as b:
        first, second = open_stores(a, settings()), open_stores(b, settings())
        try:
            await first.start()
            await second.start()
        finally:
            await second.aclose()
            await first.aclose()


# -- real processes ------------------------------------------------------------------------


@contextlib.contextmanager
def _store(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        with pg_schema_url(agents=2) as url:
            yield url


def _serve_once(store: str, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1"]
    command += ["--port", str(free_port()), "--extensions-dir", EXTENSIONS]
    return run_python([*command, "--task-store", store, *extra], timeout=60)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_second_serve_is_refused_while_the_first_runs_a_task(
    backend: str, tmp_path: Path
) -> None:
    with _store(backend, tmp_path) as store:
        args = ["--extensions-dir", EXTENSIONS, "--task-store", store]
        with cli_server(args) as (base, _proc):
            c = await client(base)
            started = await send(c, request("jobs.sleep", {"seconds": 60}, return_immediately=True))
            for extra in ([], ["--cluster"]):
                result = _serve_once(store, *extra)
                assert result.returncode == 3, result.stderr
                lines = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
                assert len(lines) == 1, result.stderr
                assert lines[0].startswith("Error: task store "), lines[0]
                assert SINGLE_HELD in lines[0]
                assert "Traceback" not in result.stderr
            task = await c.get_task(GetTaskRequest(id=started.id))
            assert task.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            ), task.status
            await c.cancel_task(CancelTaskRequest(id=started.id))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_single_serve_is_refused_by_a_cluster_and_restarts_after_kill_9(
    backend: str, tmp_path: Path
) -> None:
    with _store(backend, tmp_path) as store:
        args = ["--extensions-dir", EXTENSIONS, "--task-store", store]
        with cli_server([*args, "--cluster"]):
            result = _serve_once(store)
            assert result.returncode == 3, result.stderr
            assert CLUSTER_HELD in result.stderr.strip(), result.stderr
        with cli_server(args) as (base, proc):
            c = await client(base)
            started = await send(c, request("jobs.sleep", {"seconds": 60}, return_immediately=True))
            proc.kill9()
            proc.wait()
        # The dead process's lock went with it: the restart is not refused (the locks are
        # taken without waiting, so a stale one would refuse it with exit 3).
        with cli_server(args) as (base, _proc):
            c = await client(base)
            task = await c.get_task(GetTaskRequest(id=started.id))
            assert task.status.state == TaskState.TASK_STATE_FAILED


async def test_a_lost_postgresql_lock_is_taken_again_and_a_thief_is_named(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncpg

    from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER

    schema = pg_url.rsplit("schema=", 1)[1]
    mine = f"{LOCK_APPLICATION} {schema}"
    caplog.set_level(logging.INFO, logger="apcore_a2a.storage._owner")
    stores = open_stores(pg_url, settings())
    await stores.start()
    where = {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "database": PG_DB}
    thief = await asyncpg.connect(**where, server_settings={"search_path": schema})
    admin = await asyncpg.connect(**where)
    try:
        # Another process waits for the lock; the server drops the lock connection (as in
        # a restart): the waiter has the lock before this one is back.
        key = await thief.fetchval(f"SELECT {_KEY}")
        waiting = asyncio.ensure_future(thief.execute("SELECT pg_advisory_lock($1)", key))
        queued = "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted"
        while not await admin.fetchval(queued, thief.get_server_pid()):
            await asyncio.sleep(0.01)
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1", mine
        )
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        await asyncio.wait_for(waiting, 5)
        await _eventually(lambda: "took the lock on" in caplog.text)
        assert SINGLE_HELD in caplog.text
        assert [r.levelname for r in caplog.records if "took the lock on" in r.message] == ["ERROR"]
        await thief.execute("SELECT pg_advisory_unlock($1)", key)
        await _eventually(lambda: "again" in caplog.records[-1].message)
        assert caplog.records[-1].levelname == "INFO"
        holder = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1", mine
        )
        assert holder is not None and holder != pid
    finally:
        await admin.close()
        await thief.close()
        await stores.aclose()


async def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
