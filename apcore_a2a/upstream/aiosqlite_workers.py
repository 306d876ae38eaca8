"""Stopped aiosqlite worker threads, joined before the event loop closes.

SQLAlchemy stops a connection it terminates without waiting; a thread that reports to a
closed loop prints ``RuntimeError: Event loop is closed``.
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
