"""Turn claims: which one message may continue a task parked in ``input-required``.

Every follow-up first claims the task's current turn (:func:`turn_of`: its state and the
timestamp of that status); only the first claim of a turn wins. When the task parks
again its status has a new timestamp, so a new turn. In one process the claims live in
memory; in cluster mode they are rows of ``apcore_a2a_task_turns`` whose primary key
decides between replicas (the row's life: ``docs/storage.md``, *Several replicas*).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from a2a.server.context import ServerCallContext
from a2a.server.models import TaskModel
from a2a.types import Task, TaskState
from cachetools import FIFOCache
from sqlalchemy import and_, delete, exists, insert, literal, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from ._replicas import turns_table
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


class SqlTurnClaims:
    """Claims shared by every replica on one database (cluster mode)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        #: task id -> the turn this process claimed, until the task is saved past it
        self._held: dict[str, str] = {}
        self._releases: set[asyncio.Task[None]] = set()

    async def claim(self, task: Task) -> bool:
        turn = turn_of(task)
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
            ["task_id", "turn"], select(literal(task.id), literal(turn[:64])).where(still_there)
        )
        try:
            inserted = await guarded(self._insert(claim))
        except IntegrityError:
            return False
        if inserted == 1:
            self._held[task.id] = turn
        return inserted == 1

    async def release(self, task: Task) -> None:
        """Delete the claim row of *task*'s turn (only that turn's: a later one is another's)."""
        turn = turn_of(task)
        if self._held.get(task.id) == turn:
            del self._held[task.id]
        async with self._engine.begin() as conn:
            await conn.execute(_claim_of(task.id, turn))

    async def _insert(self, claim: Any) -> int:
        async with self._engine.begin() as conn:
            return int((await conn.execute(claim)).rowcount)

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """A save listener: a task saved past the turn claimed here releases its rows."""
        held = self._held.get(task.id)
        if held is None or held == turn_of(task):
            return
        del self._held[task.id]
        release = asyncio.ensure_future(self._release(task.id, held))
        self._releases.add(release)
        release.add_done_callback(self._releases.discard)

    async def _release(self, task_id: str, turn: str) -> None:
        # Only the claim held here: run late, a delete of all the task's claims would take
        # the claim of its next wait from the replica that made it.
        try:
            async with self._engine.begin() as conn:
                await conn.execute(_claim_of(task_id, turn))
        except Exception as exc:  # the row stays until retention deletes the task
            logger.warning("turn claim of task %s not deleted: %s", task_id, type(exc).__name__)

    async def aclose(self) -> None:
        """Wait for the deletions under way."""
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)


def _claim_of(task_id: str, turn: str) -> Any:
    """The deletion of the claim row of *task_id*'s *turn* (stored cut to its column)."""
    rows = turns_table.c
    return delete(turns_table).where(rows.task_id == task_id, rows.turn == turn[:64])
