"""A stopped aiosqlite connection's worker thread, joined before the event loop closes.

Upstream (aiosqlite 0.22, ``Connection.stop``): ``stop()`` queues the close and returns; the
worker thread finishes its running statement, then reports to the loop with
``call_soon_threadsafe``. SQLAlchemy's dialect stops a connection it terminates (a query
cancelled again while its connection closes, as anyio's cancel scopes do when a stream is
cut at shutdown) and does not wait. If the loop has closed by then, the thread prints
``RuntimeError: Event loop is closed``. Watched by ``tests/upstream/test_aiosqlite_workers.py``.
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

#: A statement in SQLite's busy handler ends within its busy timeout (15 s).
JOIN_SECONDS = 15.0


def track_workers(engine: AsyncEngine) -> Callable[[], Awaitable[None]]:
    """Record the worker thread of each connection *engine* opens; the returned ``join()``
    (called after ``engine.dispose()``) waits off the loop, at most :data:`JOIN_SECONDS`,
    for those whose connection was stopped or dropped. One still open keeps its thread."""
    workers: list[tuple[weakref.ref[Any], Thread]] = []

    @event.listens_for(engine.sync_engine, "connect")
    def _record(dbapi_connection: Any, _record: Any) -> None:
        connection = dbapi_connection.driver_connection
        workers[:] = [(ref, thread) for ref, thread in workers if thread.is_alive()]
        workers.append((weakref.ref(connection), connection._thread))

    def join_stopped() -> None:
        deadline = time.monotonic() + JOIN_SECONDS
        for ref, thread in workers:
            connection = ref()
            if connection is None or not connection._running:
                thread.join(max(0.0, deadline - time.monotonic()))

    async def join() -> None:
        if any(thread.is_alive() for _ref, thread in workers):
            await asyncio.to_thread(join_stopped)

    return join
