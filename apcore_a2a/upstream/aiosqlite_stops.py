"""An aiosqlite connection stopped once is not stopped again, so its ``close()`` cannot hang.

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
import sqlite3
from typing import Any

import aiosqlite


class StopOnce(aiosqlite.Connection):
    """An aiosqlite connection whose second ``stop()`` is a no-op (``None``: nothing to
    await); the first one's sentinel closes the database."""

    def stop(self) -> asyncio.Future[Any] | None:
        if not self._running:
            return None
        return super().stop()


def connect(database: str, *, iter_chunk_size: int = 64, **kwargs: Any) -> StopOnce:
    """:func:`aiosqlite.connect` (a *database* path as SQLAlchemy gives it), as a
    :class:`StopOnce`."""

    def connector() -> sqlite3.Connection:
        connection: sqlite3.Connection = sqlite3.connect(database, **kwargs)
        return connection

    return StopOnce(connector, iter_chunk_size)
