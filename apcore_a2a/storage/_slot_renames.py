"""A quota slot handed to its task, and the retries of the hand-overs the database did not take.

A slot taken for a request whose task is left unfinished is renamed to the task's id: the
task keeps it until it gives it back, or recovery fails the task. A rename the database did
not take (an outage, a lost connection) is retried every :data:`RETRY_SECONDS` until it
does, and a give-back under the new name frees the row meanwhile (``quota_slots.py``,
``give_back`` and ``settle``): the slot is never freed while its owner runs, nor held for
ever. Once the replica stopped, nothing is retried: such a slot is freed as a dead
replica's. A rename whose row is gone (freed as a dead replica's while this one was paused)
takes a fresh slot, or reports that none is free (the request then cancels its task,
``server/handler.py``). A retry, whose request has ended, keeps the task counted past the
quota instead, and frees the slot of a task that ended before it ran.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._slot_rows import TASK_SCOPE, slots_table, take_below, take_past, task_finished
from .outages import guarded

logger = logging.getLogger("apcore_a2a.storage")

#: Seconds between two tries of the renames the database did not take.
RETRY_SECONDS = 1.0

_S = slots_table.c


def rename_row(scope: str, row: str, new: str) -> Any:
    """The update handing the slot of *row* to *new* (no longer leased to a replica)."""
    stmt = update(slots_table).where(_S.scope == scope, _S.holder == row)
    return stmt.values(holder=new, replica_id=None)


class SlotRenames:
    """The renames of one process's slots, and the retries of those the database did not
    take. *held*: the process's rows leased to its replica (``SqlQuotaSlots._held``), one
    forgotten once renamed; *start*: runs the retries in the background (none once stopped)."""

    def __init__(
        self,
        engine: AsyncEngine,
        held: set[str],
        start: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.engine = engine
        self._held = held
        self._start = start
        #: (scope, new holder) -> (row holder, subject if known, limit) of the renames the
        #: database has not taken
        self.pending: dict[tuple[str, str], tuple[str, str | None, int]] = {}

    def row_of(self, scope: str, new: str) -> str | None:
        """The row of *new*'s rename the database has not taken, if any."""
        pending = self.pending.get((scope, new))
        return pending[0] if pending else None

    async def rename(self, scope: str, row: str, new: str, subject: str | None, limit: int) -> bool:
        """Hand the slot of *row* (of *subject*, if known) to *new*; ``False`` when the slot
        was freed meanwhile and all *limit* slots are taken now."""
        try:
            renamed = await guarded(self._rename_or_take(scope, row, new, subject, limit))
            self._held.discard(row)
            return renamed
        except BaseException:
            # The row may still name the request, which gives back nothing now: it is
            # *new*'s, renamed once the database is back (or freed by *new*'s give-back).
            self.pending[(scope, new)] = (row, subject, limit)
            if len(self.pending) == 1:
                self._start(self._retry_renames())
            raise

    async def _rename_or_take(
        self, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> bool:
        async with self.engine.begin() as conn:
            return await self._renamed_in(conn, scope, row, new, subject, limit)

    async def _renamed_in(
        self, conn: AsyncConnection, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> bool:
        if (await conn.execute(rename_row(scope, row, new))).rowcount or not subject:
            return True
        # The row is gone: freed as a dead replica's while this one was paused (its
        # heartbeats stopped), and maybe taken by another request since; or renamed
        # already, by a try whose answer was lost (a retry's). Without a slot of its
        # own the task would count for nothing.
        named = select(func.count()).where(_S.scope == scope, _S.holder == new)
        if (await conn.execute(named)).scalar_one():
            return True
        params = dict(scope=scope, subject=subject, holder=new, replica=None)
        return await take_below(conn, params, limit)

    async def _retry_renames(self) -> None:
        while self.pending:
            await asyncio.sleep(RETRY_SECONDS)
            await self.renamed()

    async def renamed(self) -> None:
        """Try the renames the database has not taken, up to the first it refuses."""
        for (scope, new), (row, subject, limit) in list(self.pending.items()):
            try:
                async with self.engine.begin() as conn:
                    await self._retried(conn, scope, row, new, subject, limit)
            except Exception as exc:  # still an outage: tried again later
                logger.debug("could not rename a quota slot: %s", type(exc).__name__)
                return
            self.forget(scope, new, row)

    async def _retried(
        self, conn: AsyncConnection, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> None:
        """One retry of a rename, whose request has ended: nobody is left to answer."""
        if scope == TASK_SCOPE and await task_finished(conn, new):
            # It ended meanwhile, maybe on another replica, whose give-back found no row
            # of its name yet: renamed now, or given a fresh slot, it would hold it for ever.
            await conn.execute(
                delete(slots_table).where(_S.scope == scope, _S.holder.in_([row, new]))
            )
            return
        if await self._renamed_in(conn, scope, row, new, subject, limit) or not limit:
            return
        # All taken (the row freed as a dead replica's while the database was out of
        # reach, and the slot taken since). Canceling the task would end a run its caller
        # was told had started, for the agent's own outage; it is kept and counted past the
        # quota instead, so the caller's next new task waits until it is back under.
        assert subject is not None  # a rename without one updated its row or took nothing
        params = dict(scope=scope, subject=subject, holder=new, replica=None)
        await take_past(conn, params, limit, f"{scope} {new}", "the database was out of reach")

    def forget(self, scope: str, new: str, row: str) -> None:
        """*new*'s rename of *row* is done (taken, or the slot freed): not retried."""
        if self.pending.get((scope, new), (None,))[0] == row:
            del self.pending[(scope, new)]
            self._held.discard(row)
