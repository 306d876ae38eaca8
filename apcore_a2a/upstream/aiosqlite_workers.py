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

from .aiosqlite_stops import connect as connect_once

#: A statement in SQLite's busy handler ends within its busy timeout (15 s).
JOIN_SECONDS = 15.0


def track_workers(engine: AsyncEngine) -> Callable[[], Awaitable[None]]:
    """Record the worker thread of each connection *engine* opens; the returned ``join()``
    (called after ``engine.dispose()``) waits off the loop, at most :data:`JOIN_SECONDS`,
    for those whose connection was stopped or dropped. One still open keeps its thread."""
    workers: list[tuple[weakref.ref[Any], Thread]] = []

    def connect(*args: Any, **kwargs: Any) -> Any:
        # Recorded before its thread starts: SQLAlchemy's "connect" event never sees a
        # connect cancelled while the worker opens the database, yet aiosqlite stops that
        # worker, which then reports to the loop.
        connection = connect_once(*args, **kwargs)
        connection._thread.daemon = True  # as SQLAlchemy's own aiosqlite connect sets it
        workers[:] = [(ref, thread) for ref, thread in workers if thread.is_alive()]
        workers.append((weakref.ref(connection), connection._thread))
        return connection

    @event.listens_for(engine.sync_engine, "do_connect")
    def _record(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        # The dialect connects through this creator, with the URL's arguments unchanged.
        cparams["async_creator_fn"] = connect

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
