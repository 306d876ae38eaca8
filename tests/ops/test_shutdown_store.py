"""The order of a stop: the drain ends (running tasks finished and stored, within
``shutdown_timeout``) before the task store closes; a final state the store cannot take
at the stop is named in one WARNING, never dropped silently."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._proxy import TcpProxy
from .test_shutdown import _stored_states, stopping

TASKS = 20
#: what a store read or write after the store closed says (SQLAlchemy, aiosqlite, asyncpg)
_CLOSED = ("no active connection", "store closed", "closed database", "connection is closed")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        with pg_schema_url() as url:
            yield url


@contextlib.asynccontextmanager
async def _writes_held(store: str) -> AsyncIterator[None]:
    """Another process's lock on the task table: reads go on, writes wait for it."""
    if store.startswith("sqlite"):
        db = sqlite3.connect(store.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")  # WAL: readers still read
        try:
            yield
        finally:
            db.execute("COMMIT")
            db.close()
        return
    schema = store.rsplit("schema=", 1)[1]
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        async with db.transaction():
            await db.execute(f"LOCK TABLE {schema}.tasks IN EXCLUSIVE MODE")
            yield
    finally:
        await db.close()


async def test_tasks_finishing_in_the_drain_are_stored_before_the_store_closes(
    store: str, tmp_path: Path
) -> None:
    gate = tmp_path / "release"
    async with stopping(store, gate, TASKS, shutdown_timeout=30) as (proc, ids):
        # They finish in the drain, and their final states wait a while for the store
        # (longer than the drain used to wait for a save, well within the busy timeout).
        async with _writes_held(store):
            gate.touch()
            await asyncio.sleep(4)
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert not [word for word in _CLOSED if word in out.lower()], out
    assert await _stored_states(store, ids) == ["TASK_STATE_COMPLETED"] * TASKS


async def test_a_final_state_the_locked_store_cannot_take_is_named_in_one_warning(
    tmp_path: Path,
) -> None:
    """The save waits on SQLite's busy timeout (15 s, 5 tries): the drain names the task
    when its grace period ends, and the stop is forced shutdown_force_timeout later (exit
    1), rather than ending 17-34 s later with the state silently dropped."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    gate = tmp_path / "release"
    settings = {"shutdown_timeout": 2, "shutdown_force_timeout": 1}
    async with stopping(store, gate, 1, **settings) as (proc, [task_id]):
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
        async with _writes_held(store):  # for the rest of the stop
            gate.touch()
            code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    warnings = [line for line in out.splitlines() if "WARNING" in line and task_id in line]
    assert len(warnings) == 1, out
    assert "final state completed" in warnings[0] and "not stored" in warnings[0], out
    assert "marks the task failed as interrupted" in warnings[0], out
    assert code == 1, out  # the exit deadline's, its ERROR line naming what it waited on
    assert "abandoning" in out.split(warnings[0])[1], out
    assert "Traceback" not in out


@pytest.mark.postgres
async def test_a_store_gone_unreachable_ends_the_stop_naming_the_task(tmp_path: Path) -> None:
    """The run's final save fails (the database cut off): the drain gives the task up at
    once, named, rather than waiting out shutdown_timeout for a save that cannot come."""
    proxy = TcpProxy(PG_HOST, PG_PORT)
    await proxy.start()
    gate = tmp_path / "release"
    try:
        async with pg_schema_url() as direct:
            store = direct.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
            async with stopping(store, gate, 1, shutdown_timeout=120) as (proc, [task_id]):
                await proxy.stop()
                gate.touch()
                code = await asyncio.to_thread(proc.wait, 60)  # before: 120 s
                out = proc.output()
    finally:
        await proxy.stop()
    warnings = [line for line in out.splitlines() if "WARNING" in line and task_id in line]
    assert len(warnings) == 1 and "final state completed" in warnings[0], out
    assert code == 0, out
    # The failed save is one line in our words (was: the SDK's traceback, and asyncio's
    # "Task exception was never retrieved").
    said = f"ERROR a2a.server.agent_execution.active_task: Task {task_id}: its state could not"
    assert f"{said} be saved (Task store unavailable; retry later); its run ended" in out, out
    assert "Traceback" not in out and "never retrieved" not in out, out
