"""The aiosqlite behaviour ``apcore_a2a/upstream/aiosqlite_workers.py`` answers with
``StopOnce``: a connection SQLAlchemy terminated (a graceful ``close()`` plus a ``stop()``)
whose ``close()`` is cancelled while its statement waits (the loop's teardown cancels every
task once) waits for ever for a second stop its worker never answers. A failure of the first
test means aiosqlite no longer hangs there: delete ``StopOnce``.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import aiosqlite

from apcore_a2a.upstream.aiosqlite_workers import connect_once as connect


async def _close_cancelled_after_a_stop(conn: aiosqlite.Connection) -> bool:
    """Whether the cancelled ``close()`` ended (the scenario of the module doc)."""
    gate = threading.Event()
    await conn.create_function("held", 0, lambda: gate.wait() and 1)
    held = asyncio.ensure_future(conn.execute("SELECT held()"))  # the worker is busy
    await asyncio.sleep(0)
    closing = asyncio.ensure_future(conn.close())  # SQLAlchemy's graceful close...
    await asyncio.sleep(0)
    conn.stop()  # ...and its forced one: the worker ends after what is queued
    closing.cancel()  # the loop's teardown
    gate.set()
    await asyncio.to_thread(conn._thread.join)  # the worker has answered all it will
    for _ in range(10):  # its answers are scheduled: let them run
        await asyncio.sleep(0)
    ended = closing.done()
    if not ended:
        closing.cancel()  # a second cancel frees this test's loop
    await asyncio.gather(closing, held, return_exceptions=True)
    return ended


async def test_aiosqlite_close_hangs_after_a_stop(tmp_path: Path) -> None:
    conn = await aiosqlite.connect(tmp_path / "t.db")
    assert not await _close_cancelled_after_a_stop(conn)


async def test_a_connection_stopped_once_closes(tmp_path: Path) -> None:
    conn = await connect(str(tmp_path / "t.db"))
    assert await _close_cancelled_after_a_stop(conn)
