"""Quota slots in the shared database: per-caller limits that hold across processes.

A limit of N for one subject (a caller key) is N numbered slots; the primary key makes
taking one atomic, so N replicas together never hand out more than N (rows past N count too:
``_slot_rows.py``). A slot taken for a request or a stream is leased to its replica: given
back, it waits :data:`LEASE_SECONDS` for the caller's next request there, then is freed (a
dead replica's, when a subject is full: dead as orphan recovery judges it,
``ReplicaRegistry.dead_cutoff``; a live replica's own that it no longer knows, its free or
take cut off, then too), or at once when its replica stops cleanly. A slot renamed to a task
id lives until the task gives it back, or recovery fails the task; a rename the database did
not take is retried (``_slot_rows.py``). A take meeting another's count of a caller's
rows waits for it holding no pooled connection (``_slot_waits.py``). A replica whose beats
resume after a break takes again the slots of its leases freed meanwhile (``_recount``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from a2a.types import Task
from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from apcore_a2a.edge.keys import stored_key

from ._replicas import ReplicaRegistry, live_ids
from ._slot_rows import PUSH_SCOPE as PUSH_SCOPE  # named here too, as it always was
from ._slot_rows import (
    RETRY_SECONDS,
    SUBJECT_CHARS,
    TAKE_SLOT,
    TURN,
    SlotRenames,
    rename_row,
    retake,
    rows_past,
    still_mine,
    take_below,
)
from ._slot_rows import TASK_SCOPE as TASK_SCOPE  # named here too, as it always was
from ._slot_rows import slots_table as slots_table  # named here too, as it always was
from ._slot_waits import TurnWaits
from ._urls import read
from .outages import guarded

logger = logging.getLogger("apcore_a2a.storage")

#: Seconds a slot given back stays reserved for this process's next taker of it.
LEASE_SECONDS = 1.0
#: Seconds a clean stop waits to free this replica's slots.
STOP_SECONDS = 3.0

_S = slots_table.c


def _stored(subject: str) -> str:
    """*subject* as its column holds it (a subject no column holds would fail the take with
    the driver's error): the task owner's rule, so every replica counts a caller alike."""
    return stored_key(subject, SUBJECT_CHARS)


class SqlQuotaSlots:
    """Quota slots of one cluster, kept in ``apcore_a2a_quota_slots`` (module docstring)."""

    def __init__(self, engine: AsyncEngine, registry: ReplicaRegistry) -> None:
        self.engine = engine
        self.registry = registry
        #: (scope, subject) -> idle leases [(freed at, row holder, taken at)], oldest first
        self._idle: dict[tuple[str, str], list[tuple[float, str, float]]] = {}
        #: (scope, holder) -> (subject, row holder, taken at, limit) of the leases in use here
        self._leased: dict[tuple[str, str], tuple[str, str, float, int]] = {}
        #: the rows leased to this replica that this process knows (taken, or being taken,
        #: idle, or waiting for their rename); any other is an orphan (:meth:`_reclaim`)
        self._held: set[str] = set()
        #: the renames to tasks, and their retries (``_slot_rows.py``)
        self._renames = SlotRenames(engine, self._held, self._start)
        #: the trims of idle leases, and the retry of the renames
        self._background: set[asyncio.Task[None]] = set()
        #: stopped (:meth:`aclose`): no background work starts
        self._closed = False
        self._recounting = asyncio.Lock()  # one at a time: two would both retake a lease
        self._waits = TurnWaits()
        registry.resumed.append(lambda: self._start(self._recount()))

    async def take(self, scope: str, subject: str, holder: str, limit: int) -> bool:
        """Take one of *subject*'s *limit* slots for *holder*; ``False`` when all are taken."""
        subject = _stored(subject)
        lease = await self._idle_lease(scope, subject, limit)
        if lease is None:
            taken = time.monotonic()
            row = f"r:{uuid.uuid4().hex}"
            self._held.add(row)
            insert = functools.partial(self._insert, scope, subject, row, limit)
            try:
                inserted = await guarded(self._waits.admit((scope, subject), insert))
            except BaseException:  # committed, maybe: an orphan then
                self._held.discard(row)
                raise
            if not inserted:
                self._held.discard(row)
                return False
            lease = (row, taken)
        self._leased[(scope, holder)] = (subject, *lease, limit)
        return True

    async def _idle_lease(self, scope: str, subject: str, limit: int) -> tuple[str, float] | None:
        """An idle lease of *subject*'s (row holder, taken at), the newest first, or none."""
        key = (scope, subject)
        # A lease taken during this replica's unbroken run of beats is handed out as it
        # is. One taken before may have been freed as a dead replica's (paused past the
        # timeout): handed out without its row it would count for nothing, and left idle
        # its row, if any, counts against the caller until trimmed (a caller at its quota
        # refused a free slot). So its row is checked first: still there, it is this
        # replica's (no other frees a live replica's rows), as a new insert's would be.
        while idle := self._idle.get(key):
            _, row, taken = idle.pop()
            if not idle:
                del self._idle[key]
            steady = self.registry.steady()
            fresh, mine = steady is not None and taken >= steady, False
            taken = taken if fresh else time.monotonic()  # checked: from the check on
            try:
                if await guarded(read(self.engine, rows_past(scope, subject, limit))):
                    # The caller is counted past its quota (_recount, a rename's retry, a
                    # quota lowered): its lease is freed, not handed on, so it comes back under.
                    await self._delete(scope, [row])
                    return None
                mine = fresh or await guarded(self._still_mine(scope, row))
            finally:
                # Gone, or unknown (a read or delete cut off): an orphan, freed at the quota.
                if not mine:
                    self._held.discard(row)
            if mine:
                return row, taken
        return None

    async def _still_mine(self, scope: str, row: str) -> bool:
        async with self.engine.begin() as conn:
            return await still_mine(conn, scope, row, self.registry.replica_id)

    async def rename(self, scope: str, old: str, new: str, limit: int = 0) -> bool:
        """Hand *old*'s slot to *new*, which keeps it until it gives it back; ``False``
        when the slot was freed meanwhile and all *limit* slots are taken now."""
        leased = self._leased.pop((scope, old), None)
        row = leased[1] if leased else old
        return await self._renames.rename(scope, row, new, leased[0] if leased else None, limit)

    async def _recount(self) -> None:
        """After a break in this replica's beats, see that each slot it leases still has
        its row: another replica may have counted it dead meanwhile and freed it (its
        caller's other requests served in its place). One freed is taken again, below the
        quota or, every slot taken, past it: counted, as a rename's retry counts its
        task, so the caller's next request waits until it is back under."""
        async with self._recounting:  # the last one's retakes committed first
            steady = self.registry.steady() or 0.0
            mine = self.registry.replica_id
            for key, lease in list(self._leased.items()):
                scope, (subject, row, taken, limit) = key[0], lease
                if taken >= steady or scope in (TASK_SCOPE, PUSH_SCOPE):
                    # Leased since the beats resumed; or to be renamed, which checks its row
                    # and refuses the request, whose caller is there to be answered.
                    continue
                params = dict(scope=scope, subject=subject, holder=row, replica=mine)
                while not self._closed and self._leased.get(key) == lease:  # still in use
                    try:
                        async with self.engine.begin() as conn:
                            await retake(conn, params, limit)
                        break
                    except Exception as exc:  # the database still out of reach: tried again
                        logger.debug("could not check a quota slot here: %s", type(exc).__name__)
                        await asyncio.sleep(RETRY_SECONDS)

    async def settle(
        self,
        scope: str,
        subject: str,
        holder: str,
        limit: int,
        stored: Callable[[AsyncConnection], Awaitable[bool]],
    ) -> bool:
        """Give *holder* one of *subject*'s slots if *stored* (read in the settle's
        transaction) finds its thing, none if not; ``False`` when it needs one and all are
        taken. A write and a delete of the thing racing on two processes each settle after
        their write, one at a time, so the last to settle reads the last write (a check
        made before a write cannot: a registration that found the thing stored took no
        slot, and a delete committed just then gave the old one back)."""
        return await guarded(self._settle(scope, _stored(subject), holder, limit, stored))

    async def _settle(
        self,
        scope: str,
        subject: str,
        holder: str,
        limit: int,
        stored: Callable[[AsyncConnection], Awaitable[bool]],
    ) -> bool:
        same = (_S.scope == scope) & (_S.holder == holder)
        turn = {"scope": f"{scope}:turn", "subject": holder[:255]}
        settled = True
        async with self.engine.begin() as conn:
            await conn.execute(TURN, turn)
            row = self._renames.row_of(scope, holder)
            if row is not None:  # a rename the database did not take: this slot's
                await conn.execute(rename_row(scope, row, holder))
            held = (await conn.execute(select(func.count()).where(same))).scalar_one()
            if not await stored(conn):
                await conn.execute(delete(slots_table).where(same))
            elif held > 1:
                first = select(func.min(_S.slot)).where(same).scalar_subquery()
                await conn.execute(delete(slots_table).where(same, _S.slot != first))
            elif not held:
                params = dict(scope=scope, subject=subject, holder=holder, replica=None)
                settled = await self._take_free(conn, params, limit, reclaim=False)
            done = (_S.scope == turn["scope"]) & (_S.subject == turn["subject"])
            await conn.execute(delete(slots_table).where(done))
        if row is not None:
            self._renames.forget(scope, holder, row)
        return settled

    async def give_back(self, scope: str, holder: str) -> None:
        """Free the slot *holder* took (nothing when it holds none)."""
        leased = self._leased.pop((scope, holder), None)
        if leased is None:
            renamed = self._renames.row_of(scope, holder)
            await self._delete(scope, [holder] if renamed is None else [holder, renamed])
            if renamed is not None:
                self._renames.forget(scope, holder, renamed)
            return
        subject, row, taken, _ = leased
        idle = self._idle.setdefault((scope, subject), [])
        idle.append((time.monotonic(), row, taken))
        if len(idle) == 1:
            self._start(self._trim(scope, subject))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        if self._closed:  # what it would do is left to the rule of a dead replica's slots
            work.close()
            return
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """At a clean stop: free every slot this replica leases (its requests and streams
        are over, and no next request of theirs comes here); task slots stay, those whose
        rename the database has not taken yet too (renamed now, or freed once the replica
        is dead)."""
        self._closed = True
        background, self._background = self._background, set()
        for task in background:
            task.cancel()
        self._idle.clear()
        self._leased.clear()
        self._held.clear()
        if not self.registry.registered:  # a start stopped early: no slot, maybe no table
            return
        try:
            # bounded: a stop during an outage must not wait on the database
            async with asyncio.timeout(STOP_SECONDS):
                await self._renames.renamed()
                pending = [row for row, _, _ in self._renames.pending.values()]
                mine = (_S.replica_id == self.registry.replica_id) & _S.holder.not_in(pending)
                await self._execute(delete(slots_table).where(mine))
        except Exception as exc:  # a database outage: freed once the replica is dead
            logger.warning("could not free this replica's quota slots: %s", type(exc).__name__)
        self._renames.pending.clear()

    async def task_ended(self, task: Task, _event: object) -> None:
        """Free the slot of *task*, which recovery failed (its run, which would have
        given it back, is gone): listener of the store's interrupted tasks."""
        await self._delete(TASK_SCOPE, [task.id])

    async def _trim(self, scope: str, subject: str) -> None:
        key = (scope, subject)
        while idle := self._idle.get(key):
            await asyncio.sleep(max(0.0, idle[0][0] + LEASE_SECONDS - time.monotonic()))
            cutoff = time.monotonic() - LEASE_SECONDS
            idle = self._idle.get(key, [])
            old = [row for freed, row, _ in idle if freed <= cutoff]
            if not old:
                continue
            kept = [lease for lease in idle if lease[0] > cutoff]
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
            self._held.difference_update(old)
            try:
                await self._delete(scope, old)
            except Exception as exc:  # an outage: an orphan, freed at the subject's quota
                logger.warning("could not free %d quota slots: %s", len(old), type(exc).__name__)

    async def _insert(self, scope: str, subject: str, row: str, limit: int) -> bool:
        replica = self.registry.replica_id
        params = dict(scope=scope, subject=subject, holder=row, replica=replica)
        async with self.engine.begin() as conn:
            take = TAKE_SLOT.bindparams(slot=secrets.randbelow(limit), limit=limit)
            if (await conn.execute(take, params)).first() is not None:
                return True
            # Rows past the quota counted by another take, room maybe: SlotsBusy (TurnWaits).
            return await self._take_free(conn, params, limit, reclaim=True)

    async def _take_free(
        self, conn: AsyncConnection, params: dict[str, Any], limit: int, *, reclaim: bool
    ) -> bool:
        """Take any free slot below *limit* for *params*' holder; ``False`` when all are
        taken. With *reclaim* (a slot leased to a replica), once all are, dead replicas'
        slots are freed and the take tried again (:meth:`_reclaim`)."""
        # An admission (reclaim) never queues for the count (``_slot_waits.py``).
        if await take_below(conn, params, limit, wait=not reclaim):
            return True
        if not reclaim:
            return False
        # Counted again whatever it freed: a free under way elsewhere (a trim) that its
        # delete waited for frees the slot all the same, and is seen now.
        await self._reclaim(conn, params["scope"], params["subject"])
        return await take_below(conn, params, limit, wait=False)

    async def _delete(self, scope: str, holders: list[str]) -> None:
        stmt = delete(slots_table).where(_S.scope == scope, _S.holder.in_(holders))
        await guarded(self._execute(stmt))

    async def _execute(self, stmt: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(stmt)

    async def holders(self, scope: str, subject: str) -> list[str]:
        """The holders of *subject*'s slots."""
        stmt = select(_S.holder).where(_S.scope == scope, _S.subject == _stored(subject))
        return [row[0] for row in await guarded(read(self.engine, stmt))]

    async def _reclaim(self, conn: AsyncConnection, scope: str, subject: str) -> None:
        """Free *subject*'s slots held by dead replicas, and this replica's orphans: rows
        this process no longer knows (a free or a take whose connection was cut)."""
        # Dead by the rule of orphan recovery, not just an old heartbeat: after a stall no
        # replica could beat through, every heartbeat is old, this replica's own too, and
        # freeing the live replicas' slots would let more requests in than the quota.
        live = live_ids(self.registry.dead_cutoff())
        mine = self.registry.replica_id
        of_subject = (_S.scope == scope) & (_S.subject == subject)
        # Read first, compared after: a row of a take under way here is known before its
        # insert, so a row read here and not known is no longer this process's.
        rows = await conn.execute(select(_S.holder).where(of_subject, _S.replica_id == mine))
        orphans = [row for (row,) in rows if row not in self._held]
        dead = (_S.replica_id != mine) & _S.replica_id.not_in(live)
        orphaned = (_S.replica_id == mine) & _S.holder.in_(orphans)
        await conn.execute(
            delete(slots_table).where(of_subject, _S.replica_id.is_not(None), dead | orphaned)
        )
