"""A stopped aiosqlite connection's worker thread, joined before the event loop closes.

Upstream (aiosqlite 0.22, ``Connection.stop``): ``stop()`` queues the close and returns at
once. The worker thread first finishes the statement it is running, then reports each
result to the event loop with ``call_soon_threadsafe``. SQLAlchemy's aiosqlite dialect
calls ``stop()`` and does not wait when it terminates a connection: a query cancelled a
second time while its connection closes (anyio's cancel scopes cancel again at every
``await``, as when a stream's connection is cut at shutdown), or a connection collected
unreturned. If the loop closes in between, the thread dies printing ``RuntimeError:
Event loop is closed`` on a clean stop. :func:`track_workers` records each connection's
thread; closing the store joins the stopped ones while the loop still runs. Watched by
``tests/upstream/test_aiosqlite_workers.py``.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable
from threading import Thread
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

#: How long closing a store waits for stopped workers: a statement waiting on SQLite's busy
#: handler finishes within its busy timeout (15 s); a clean stop is not held longer.
JOIN_SECONDS = 15.0


def track_workers(engine: AsyncEngine) -> Callable[[], Awaitable[None]]:
    """Record the worker thread of every connection *engine* opens; returns ``join()``,
    which waits (off the loop, at most :data:`JOIN_SECONDS`) for the workers whose
    connection was stopped or dropped. Call it after ``engine.dispose()``."""
    workers: list[tuple[weakref.ref[Any], Thread]] = []

    @event.listens_for(engine.sync_engine, "connect")
    def _record(dbapi_connection: Any, _record: Any) -> None:
        connection = dbapi_connection.driver_connection
        thread = getattr(connection, "_thread", None)
        if isinstance(thread, Thread):
            workers[:] = [(ref, t) for ref, t in workers if t.is_alive()]
            workers.append((weakref.ref(connection), thread))

    def stopping() -> list[Thread]:
        found = []
        for ref, thread in workers:
            connection = ref()
            # A connection still running (checked out, never closed) keeps its thread:
            # waiting for it would only hold the stop up.
            if thread.is_alive() and (connection is None or not connection._running):
                found.append(thread)
        return found

    def join_all(threads: list[Thread]) -> None:
        deadline = time.monotonic() + JOIN_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    async def join() -> None:
        threads = stopping()
        if threads:
            await asyncio.to_thread(join_all, threads)

    return join
