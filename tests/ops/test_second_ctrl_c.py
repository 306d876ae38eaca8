"""A second Ctrl-C that comes before the lifespan's shutdown has begun (two quick ones, or
one while uvicorn waits for a connection to close) still closes the task store.

uvicorn skips the lifespan shutdown once a second SIGINT has come. Before, the stores were
never closed: a SQLite database kept its write-ahead log (``-wal``) beside it, a cluster
replica stayed registered as alive (its claims taken) until another replica judged it dead,
and the lifespan's task was cancelled at the loop's end with a traceback on stderr.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
import pytest

from apcore_a2a.ops.ctrl_c import ECHO

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import ROOT, TLS, ServerProcess, cli_server
from ._agent import message_params, rpc, wait_state
from ._proc import serve_process
from .test_shutdown import _stored_states

EXTENSIONS = str(ROOT / "examples" / "extensions")
#: The gap between the two SIGINTs: a person hitting Ctrl-C twice, as soon as the second is
#: not taken for the first delivered again (ECHO); uvicorn's main loop looks for the first
#: only every 0.1 s, and its shutdown waits 0.1 s more.
QUICK = ECHO + 0.02


def _interrupt_twice(pids: list[int]) -> None:
    """Ctrl-C twice in a terminal: SIGINT to every process of the group, twice."""
    for _ in range(2):
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        time.sleep(QUICK)


async def _exited(proc: ServerProcess) -> tuple[int, str]:
    code = await asyncio.to_thread(proc.wait, 60)
    proc.judged = True  # judged here
    return code, proc.output()


def _left_open(db: Path) -> list[str]:
    """What an unclosed SQLite database leaves beside it: its write-ahead log and index
    (SQLite removes both when its last connection closes)."""
    return sorted(p.name for p in db.parent.iterdir() if p.name.endswith(("-wal", "-shm")))


async def _live_replicas(schema: str) -> int:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        live = f"SELECT count(*) FROM {schema}.apcore_a2a_replicas WHERE heartbeat_at > 0"
        return int(await conn.fetchval(live))
    finally:
        await conn.close()


async def test_two_quick_ctrl_c_close_the_store(tmp_path: Path) -> None:
    db = tmp_path / "tasks.db"
    args = ["--extensions-dir", EXTENSIONS, "--task-store", f"sqlite:///{db}"]
    with cli_server(args) as (_url, proc):
        _interrupt_twice([proc.pid])
        code, out = await _exited(proc)
    assert code == 0, out  # nothing ran: a clean stop
    assert "Traceback" not in out, out
    assert "Second Ctrl-C" not in out, out  # nothing was left waiting (it said "for 0")
    assert _left_open(db) == [], out  # before: ['tasks.db-shm', 'tasks.db-wal']


@pytest.mark.parametrize("group", [True, False], ids=["terminal", "parent-alone"])
async def test_two_quick_ctrl_c_to_the_workers_close_their_stores(
    tmp_path: Path, group: bool
) -> None:
    """In a terminal Ctrl-C reaches every process; ``docker run`` without one hands it to
    the parent alone, which forwards SIGTERM, then SIGINT."""
    db = tmp_path / "tasks.db"
    store = ["--task-store", f"sqlite:///{db}", "--cluster", "--workers", "2"]
    with cli_server(["--extensions-dir", EXTENSIONS, *store]) as (_url, proc):
        found = re.search(r"with 2 worker processes \((\d+), (\d+)\)", proc.output())
        assert found is not None, proc.output()
        _interrupt_twice([proc.pid, *map(int, found.groups())] if group else [proc.pid])
        code, out = await _exited(proc)
    assert code == 0, out
    assert "Traceback" not in out, out
    assert _left_open(db) == [], out


async def test_two_quick_ctrl_c_deregister_a_postgresql_replica() -> None:
    async with pg_schema_url() as url:
        schema = parse_qs(urlsplit(url).query)["schema"][0]
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
        with cli_server(args) as (_url, proc):
            assert await _live_replicas(schema) == 1
            _interrupt_twice([proc.pid])
            code, out = await _exited(proc)
        assert code == 0, out
        assert "Traceback" not in out, out
        assert await _live_replicas(schema) == 0, out  # before: 1, until judged dead


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_second_ctrl_c_while_a_connection_is_open_closes_the_store(
    tmp_path: Path, first: signal.Signals
) -> None:
    """The second Ctrl-C comes while a blocking call's connection is open (the drain runs
    before uvicorn's wait for it): also before the lifespan's shutdown, whatever the gap
    between the two. A Ctrl-C after SIGTERM is a second one (uvicorn's rule)."""
    db = tmp_path / "tasks.db"
    with serve_process(task_store=f"sqlite:///{db}", shutdown_timeout=120) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:
            params = message_params("ops.await_file", {"path": str(tmp_path / "never")})
            blocking = asyncio.ensure_future(rpc(http, "SendMessage", params))
            [task] = await _running(http)
            proc.send_signal(first)
            async with asyncio.timeout(30):  # a hang guard
                while "Shutting down: waiting up to" not in proc.output():
                    await asyncio.sleep(0.05)
            await asyncio.sleep(ECHO)  # a person's next Ctrl-C, not the first delivered again
            proc.send_signal(signal.SIGINT)
            code, out = await _exited(proc)
            blocking.cancel()
    assert code == 1, out  # the task was abandoned
    said = "Second Ctrl-C: the stop waits no longer for 1 running task(s); the next start"
    assert said in out, out
    assert "Traceback" not in out, out
    # The one line above, not one more per abandoned task from the SDK's close of its run.
    assert "Dispatcher task is not running" not in out, out
    assert _left_open(db) == [], out
    # Left as it was: the next start fails it as interrupted.
    assert await _stored_states(f"sqlite:///{db}", [task]) == ["TASK_STATE_WORKING"]


async def _running(http: httpx.AsyncClient) -> list[str]:
    """The ids of the tasks that run, once one does."""
    async with asyncio.timeout(30):
        while True:
            reply = await rpc(http, "ListTasks", {})
            ids = [t["id"] for t in reply.get("result", {}).get("tasks", [])]
            if ids:
                await wait_state(http, ids[0], {"TASK_STATE_WORKING"})
                return ids
            await asyncio.sleep(0.02)
