"""The aiosqlite behaviour ``apcore_a2a/upstream/aiosqlite_workers.py`` answers: a stopped
connection's worker thread finishes its statement after ``stop()`` returns and reports to
the event loop, which has closed by then: ``RuntimeError: Event loop is closed`` from the
thread. A failure of the first test means aiosqlite waits (or stays quiet): delete that
file. Each scenario runs in a child process, whose loop and threads are its own.
"""

from __future__ import annotations

import subprocess
import sys

from tests._support import ROOT

# A statement that runs about a second, cancelled while it runs; then the connection is
# stopped (as SQLAlchemy's dialect terminates one) and the loop closes.
_SCENARIO = """
import asyncio, sys, tempfile
sys.path.insert(0, {root!r})
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from apcore_a2a.upstream.aiosqlite_workers import track_workers

SLOW = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000000)"
        " SELECT count(*) FROM c")

KEPT = []

async def main(join_them):
    folder = tempfile.mkdtemp()
    engine = create_async_engine(f"sqlite+aiosqlite:///{{folder}}/t.db")
    join = track_workers(engine)
    raw = await engine.raw_connection()
    aio = raw.driver_connection
    raw.detach()  # the pool forgets it: only aiosqlite stops it
    KEPT.extend([engine, raw])  # nothing collected (and closed) before the loop closes
    query = asyncio.ensure_future(aio.execute(SLOW))
    await asyncio.sleep(0.2)
    query.cancel()
    aio.stop()
    if join_them:
        await join()
    print("loop closing", flush=True)
    return aio._thread

# The process goes on until the thread is done (a daemon: exit would kill it unheard).
asyncio.run(main({join_them})).join(60)
"""


def _run(join_them: bool) -> str:
    script = _SCENARIO.format(root=str(ROOT), join_them=join_them)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "loop closing" in done.stdout
    return done.stderr


def test_a_stopped_connections_thread_reports_to_a_closed_loop() -> None:
    assert "RuntimeError: Event loop is closed" in _run(join_them=False)


def test_joining_the_stopped_workers_keeps_the_stop_quiet() -> None:
    assert _run(join_them=True) == ""


# A connect cancelled while the worker opens the database (a request cancelled as the pool
# opens a connection): aiosqlite stops the thread, and SQLAlchemy never saw a connection.
# The long switch interval keeps the worker off the GIL until this thread blocks, so it
# reports to the closed loop unless join() waits for it (seen under load in the suite).
_CANCELLED_CONNECT = """
import asyncio, sys, tempfile, threading
sys.path.insert(0, {root!r})
sys.setswitchinterval(5)
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.upstream.aiosqlite_workers import track_workers

async def main():
    engine = create_engine(parse_store_url(f"sqlite:///{{tempfile.mkdtemp()}}/t.db"))
    join = track_workers(engine)
    connecting = asyncio.ensure_future(engine.connect().start())
    await asyncio.sleep(0)  # the worker is started, its database not yet open
    connecting.cancel()
    await asyncio.gather(connecting, return_exceptions=True)
    await engine.dispose()
    await join()

asyncio.run(main())
for thread in threading.enumerate():
    thread is threading.main_thread() or thread.join(60)
"""


def test_a_cancelled_connects_worker_is_joined_too() -> None:
    script = _CANCELLED_CONNECT.format(root=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
