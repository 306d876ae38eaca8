"""Turn claims: which one message may continue a task parked in ``input-required``.

Every follow-up first claims the task's current turn (:func:`turn_of`: its state and the
timestamp of that status); only the first claim of a turn wins. When the task parks
again its status has a new timestamp, so a new turn. In one process the claims live in
memory; in cluster mode they are rows of ``apcore_a2a_task_turns`` whose primary key
decides between replicas (the row's life: ``docs/storage.md``, *Several replicas*).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from a2a.server.context import ServerCallContext
from a2a.server.models import TaskModel
from a2a.types import Task, TaskState
from cachetools import FIFOCache
from sqlalchemy import and_, delete, exists, insert, literal, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from apcore_a2a.edge.call import CallRecord

from ._replicas import (
    ReplicaRegistry,
    claimants_table,
    claims_table,
    db_seconds,
    live_ids,
    turns_table,
    upsert_of,
)
from .outages import guarded

logger = logging.getLogger(__name__)


def turn_of(task: Task) -> str:
    """The turn *task* is in: its state and the timestamp of its status."""
    return f"{task.status.state}:{task.status.timestamp.ToJsonString()}"


class TurnClaims(Protocol):
    async def claim(self, task: Task) -> bool:
        """Whether this call is the first to claim the turn *task* (as stored) is in."""
        ...

    async def release(self, task: Task) -> None:
        """Give back the claim of *task*'s turn: the message that took it was refused."""
        ...

    def standing(self, task_id: str) -> Awaitable[bool] | None:
        """Asked by a save listener after the save of *task_id* past the turn claimed
        here: whether the claim still stood then (no replica had taken it over), once
        known; ``None``: nothing to tell."""
        ...


def giver(claims: TurnClaims, task: Task, call: CallRecord) -> Callable[[], Awaitable[None]]:
    """The ``CallRecord.give_back`` of *call*, a follow-up that claimed *task*'s wait in
    *claims*: the claim released once (later calls do nothing)."""

    async def give_back() -> None:
        if call.give_back is not give_back:
            return  # given back already
        call.give_back = None
        try:
            # Shielded: a request torn down by a hang-up must still give it back.
            await asyncio.shield(claims.release(task))
        except Exception as failure:  # the answer stays the refusal
            logger.warning("turn of task %s not given back: %s", task.id, type(failure).__name__)

    return give_back


class MemoryTurnClaims:
    """Claims of one process, remembered for the most recent *max_entries* turns."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._seen: FIFOCache[tuple[str, str], None] = FIFOCache(maxsize=max_entries)

    async def claim(self, task: Task) -> bool:
        # No await between the test and the insert: atomic on the event loop.
        key = (task.id, turn_of(task))
        if key in self._seen:
            return False
        self._seen[key] = None
        return True

    async def release(self, task: Task) -> None:
        """Forget the claim of *task*'s turn."""
        self._seen.pop((task.id, turn_of(task)), None)

    def standing(self, task_id: str) -> None:
        """One process: no other takes a claim over."""


class SqlTurnClaims:
    """Claims shared by every replica on one database (cluster mode). A claim names its
    replica in ``apcore_a2a_task_turn_claimants`` (the same transaction); one that no live
    replica holds, of a task still stored in that wait, is taken over (it died before the
    task moved on, and no message would continue the task again), and so is one naming
    this replica whose answer was lost (its follow-up was refused), which this replica
    also deletes itself once the database answers, for the others. A claim an earlier
    release wrote names no replica: it is taken over only once it has been known for
    ``replica_timeout`` by the database's clock (``docs/storage.md``, *Several replicas*)."""

    def __init__(self, engine: AsyncEngine, registry: ReplicaRegistry) -> None:
        self._engine = engine
        self._registry = registry
        #: task id -> the turn this process claimed, until the task is saved past it
        self._held: dict[str, str] = {}
        #: (task id, turn) -> claims of it under way in this process (and releases): a
        #: claim naming this replica that is neither held nor another's under way is one
        #: whose answer was lost (the connection cut after its commit), which no run here
        #: continues
        self._claiming: Counter[tuple[str, str]] = Counter()
        self._releases: set[asyncio.Task[bool]] = set()
        #: task id -> the deletion of the claim its latest save made past (:meth:`standing`)
        self._standing: dict[str, asyncio.Task[bool]] = {}
        #: deletions of this replica's claims whose answer was lost (:meth:`_free_later`)
        self._frees: dict[tuple[str, str], asyncio.Future[None]] = {}

    async def claim(self, task: Task) -> bool:
        turn = turn_of(task)[:64]
        status = TaskModel.status
        still_there = exists().where(
            TaskModel.id == task.id,
            or_(
                and_(
                    status["state"].as_string() == TaskState.Name(task.status.state),
                    status["timestamp"].as_string() == task.status.timestamp.ToJsonString(),
                ),
                # A row an older SDK wrote: its status reads back in another spelling.
                TaskModel.protocol_version.is_distinct_from("1.0"),
            ),
        )
        claim = insert(turns_table).from_select(
            ["task_id", "turn"], select(literal(task.id), literal(turn)).where(still_there)
        )
        key = (task.id, turn)
        self._claiming[key] += 1
        try:
            try:
                inserted = await guarded(self._insert(task.id, turn, claim))
            except IntegrityError:
                try:
                    inserted = await guarded(self._take_over(task.id, turn, still_there, claim))
                except IntegrityError:
                    return False
            if inserted == 1:
                self._held[task.id] = turn_of(task)
            return inserted == 1
        except BaseException:
            # Its commit may have been done, its answer lost: a claim naming this replica
            # that no run holds, which the other replicas take for a live run's.
            self._free_later(task.id, turn)
            raise
        finally:
            self._claiming -= Counter({key: 1})

    async def release(self, task: Task) -> None:
        """Delete the claim row of *task*'s turn (only that turn's: a later one is another's)."""
        turn = turn_of(task)
        if self._held.get(task.id) == turn:
            del self._held[task.id]
        # Under way until deleted: a claim taking it over meanwhile would lose its row to
        # this delete. Left behind (an outage), it is taken over as an orphan.
        key = (task.id, turn[:64])
        self._claiming[key] += 1
        try:
            await self._forget(task.id, turn)
        except BaseException:
            self._free_later(task.id, turn[:64])
            raise
        finally:
            self._claiming -= Counter({key: 1})

    async def _insert(self, task_id: str, turn: str, claim: Any) -> int:
        async with self._engine.begin() as conn:
            inserted = int((await conn.execute(claim)).rowcount)
            if inserted == 1:
                await self._mine(conn, task_id, turn)
            return inserted

    async def _take_over(self, task_id: str, turn: str, still_there: Any, claim: Any) -> int:
        """Claim a turn whose claim no live replica holds: its claimant is dead by
        ``ReplicaRegistry.dead_cutoff`` (the database's clock), or it names none (an earlier
        release's) and was known by that cutoff, or it is this replica's and this process
        neither holds it nor is making it (its answer was lost). Its row is deleted and
        claimed again in one transaction, so of two replicas taking it over at once one
        deletes it, the other finds nothing to delete. An unnamed claim met for the first
        time is noted."""
        cutoff = self._registry.dead_cutoff()
        by = claimants_table.c
        unheld = [
            by.replica_id.not_in(live_ids(cutoff)),
            and_(by.replica_id.is_(None), by.since <= cutoff),
        ]
        # This call is one of the claims under way: none other, and none held.
        if self._held.get(task_id, "")[:64] != turn and self._claiming[task_id, turn] == 1:
            unheld.append(by.replica_id == self._registry.replica_id)
        stale = delete(turns_table).where(
            turns_table.c.task_id == task_id,
            turns_table.c.turn == turn,
            still_there,
            exists().where(by.task_id == task_id, by.turn == turn, or_(*unheld)),
        )
        async with self._engine.begin() as conn:
            if not (await conn.execute(stale)).rowcount:
                await conn.execute(self._claimant(task_id, turn, None))
                return 0
            inserted = int((await conn.execute(claim)).rowcount)
            if inserted == 1:
                await self._mine(conn, task_id, turn)
            logger.warning(
                "task %s: took over a claim of its wait no run holds (its replica dead, or "
                "its answer lost)",
                task_id,
            )
            return inserted

    async def _mine(self, conn: AsyncConnection, task_id: str, turn: str) -> None:
        """Name this replica the claimant of *turn*, and (as an earlier release reads a
        claim's holder there) the task's replica in ``apcore_a2a_task_claims``, its owner
        kept, or none until the run writes it."""
        replica = self._registry.replica_id
        await conn.execute(self._claimant(task_id, turn, replica))
        upsert = upsert_of(self._engine)
        stmt = upsert(claims_table).values(task_id=task_id, owner=None, replica_id=replica)
        keys = [claims_table.c.task_id]
        await conn.execute(
            stmt.on_conflict_do_update(index_elements=keys, set_={"replica_id": replica})
        )

    def _claimant(self, task_id: str, turn: str, replica: str | None) -> Any:
        """This replica's claim of *turn* (*replica*), or the note that a claim naming none
        was met now (``None``: kept if the turn has a claimant row already; none if the
        claim is gone meanwhile, else a later earlier-release claim would seem old)."""
        upsert = upsert_of(self._engine)
        since = db_seconds(self._engine)
        keys = [claimants_table.c.task_id, claimants_table.c.turn]
        if replica is None:
            rows = turns_table.c
            claimed = exists().where(rows.task_id == task_id, rows.turn == turn)
            met = select(literal(task_id), literal(turn), since).where(claimed)
            note = upsert(claimants_table).from_select(["task_id", "turn", "since"], met)
            return note.on_conflict_do_nothing(index_elements=keys)
        stmt = upsert(claimants_table).values(
            task_id=task_id, turn=turn, replica_id=replica, since=since
        )
        return stmt.on_conflict_do_update(
            index_elements=keys, set_={"replica_id": replica, "since": since}
        )

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """A save listener: a task saved past the turn claimed here releases its rows."""
        held = self._held.get(task.id)
        if held is None or held == turn_of(task):
            return
        del self._held[task.id]
        release = asyncio.ensure_future(self._release(task.id, held))
        self._releases.add(release)
        self._standing[task.id] = release
        release.add_done_callback(functools.partial(self._released, task.id))

    def _released(self, task_id: str, release: asyncio.Task[bool]) -> None:
        self._releases.discard(release)
        if self._standing.get(task_id) is release:
            del self._standing[task_id]

    def standing(self, task_id: str) -> Awaitable[bool] | None:
        """Whether the claim the task's save just made past (:meth:`saved`, a listener
        before the caller's) still named this replica as it was deleted: a replica paused
        between its claim and that save may have been judged dead, the claim taken over
        and the turn continued elsewhere (a2a-sdk then saves its event again on the newer
        task, so the save alone does not tell)."""
        return self._standing.get(task_id)

    def unsaved(self, task: Task, context: ServerCallContext) -> None:
        """A listener of failed saves: a2a-sdk's run of *task* ends at a save that fails
        (its consumer writes the task failed, once, and stops), so a turn it held is held
        no more, whether its request is still there to give it back or not (its client
        left). Its claim is deleted once the database answers, if it still names this
        replica and no follow-up here took it again (:meth:`_free_later`): left held, every
        later follow-up was refused busy for as long as this replica ran."""
        held = self._held.pop(task.id, None)
        if held is not None:
            self._free_later(task.id, held[:64])

    async def _release(self, task_id: str, turn: str) -> bool:
        # Only the claim held here: run late, a delete of all the task's claims would take
        # the claim of its next wait from the replica that made it; and only while it names
        # this replica, which tells whether it still stood.
        try:
            return await self._forget(task_id, turn)
        except Exception as exc:  # the row stays until retention deletes the task
            logger.warning("turn claim of task %s not deleted: %s", task_id, type(exc).__name__)
            return True  # not known: the run goes on (docs/storage.md, Taking over a turn claim)

    def _free_later(self, task_id: str, turn: str) -> None:
        """Delete, once the database answers, this replica's claim of *turn* (cut to its
        column) that a claim or release whose answer was lost may have left stored."""
        key = (task_id, turn)
        if key not in self._frees:  # one per claim, however many follow-ups failed
            self._frees[key] = asyncio.ensure_future(self._free(task_id, turn))
            self._frees[key].add_done_callback(lambda _: self._frees.pop(key, None))

    async def _free(self, task_id: str, turn: str) -> None:
        key = (task_id, turn)
        while True:
            if self._held.get(task_id, "")[:64] == turn:
                return  # a follow-up here took it over since: its run holds it
            if not self._claiming[key]:  # else a claim here may take it over: see after it
                self._claiming[key] += 1  # under way: no claim here takes it for a lost one
                try:
                    await self._forget(task_id, turn)
                    return
                except Exception as exc:
                    logger.info(
                        "lost turn claim of task %s not freed yet: %s", task_id, type(exc).__name__
                    )
                finally:
                    self._claiming -= Counter({key: 1})
            await asyncio.sleep(self._registry.heartbeat_interval)

    async def aclose(self) -> None:
        """Wait for the deletions under way; give up freeing lost claims (dead with this
        replica, the others take them over)."""
        frees = list(self._frees.values())
        for free in frees:
            free.cancel()
        if self._releases or frees:
            await asyncio.gather(*self._releases, *frees, return_exceptions=True)

    async def _forget(self, task_id: str, turn: str) -> bool:
        """Delete the claim of *task_id*'s *turn* (stored cut to its column) and its
        claimant, only while it names this replica (not one another replica took over).
        Whether a claim was deleted."""
        by = claimants_table.c
        of_turn = (by.task_id == task_id) & (by.turn == turn[:64])
        named = by.replica_id == self._registry.replica_id
        rows = turns_table.c
        claim = (rows.task_id == task_id) & (rows.turn == turn[:64])
        claim &= exists().where(of_turn, named)
        async with self._engine.begin() as conn:
            deleted = (await conn.execute(delete(turns_table).where(claim))).rowcount
            await conn.execute(delete(claimants_table).where(of_turn, named))
        return bool(deleted)
