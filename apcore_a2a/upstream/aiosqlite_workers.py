"""aiosqlite's ``stop()``, corrected twice for the SQLite stores' connections: stopped
worker threads are joined before the event loop closes, and a connection stopped once is not
stopped again, so its ``close()`` cannot hang.

SQLAlchemy stops a connection it terminates without waiting; a thread that reports to a
closed loop prints ``RuntimeError: Event loop is closed``.

aiosqlite 0.22's ``close()`` stops the worker in its ``finally`` and awaits that stop's
answer. When the connection was already stopped (SQLAlchemy terminates a connection whose
caller was cancelled: a graceful ``close()`` under ``asyncio.shield`` plus a ``stop()``),
the worker ends at the first stop and never answers the second: a ``close()`` cancelled
while its statement waits (the loop's teardown cancels every task once) then waits for
ever, and ``asyncio.run`` with it: the agent's stop was forced after
``shutdown_force_timeout`` (exit 1, "abandoning no module call").
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import time
import weakref
from collections.abc import Awaitable, Callable
from threading import Thread
from typing import Any

import aiosqlite
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


class StopOnce(aiosqlite.Connection):
    """An aiosqlite connection whose second ``stop()`` is a no-op (``None``: nothing to
    await); the first one's sentinel closes the database."""

    def stop(self) -> asyncio.Future[Any] | None:
        if not self._running:
            return None
        return super().stop()


def connect_once(database: str, *, iter_chunk_size: int = 64, **kwargs: Any) -> StopOnce:
    """:func:`aiosqlite.connect` (a *database* path as SQLAlchemy gives it), as a
    :class:`StopOnce`."""
    return StopOnce(functools.partial(sqlite3.connect, database, **kwargs), iter_chunk_size)


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
