"""Which replicas have a client streaming a task right now (cluster mode).

``cancel_on_disconnect`` cancels a task when its last stream is dropped. A process counts
its own streams; this tells it whether a live replica elsewhere has one too (a client
that resubscribed there, another watcher), so that a drop here does not cancel a task a
client still follows on another replica. Each open stream is a row of
``apcore_a2a_quota_slots`` (scope ``follow``, the task id as subject) with the replica
that serves it: the table every replica already shares, whose rows name their replica,
so a dead replica's streams stop counting with it, and retention deletes what one left.
"""

from __future__ import annotations

import logging
import secrets

from sqlalchemy import exists, insert, select

from ._replicas import live_ids
from .outages import guarded
from .quota_slots import SqlQuotaSlots, slots_table

logger = logging.getLogger("apcore_a2a.storage")

#: Scope of the rows of open streams: the subject is the task id.
FOLLOW_SCOPE = "follow"
_S = slots_table.c


class StreamFollowers:
    """Open streams per task, shared by the replicas of one cluster (module docstring)."""

    def __init__(self, slots: SqlQuotaSlots) -> None:
        self.slots, self.engine, self.registry = slots, slots.engine, slots.registry

    async def follow(self, task_id: str) -> str | None:
        """Note a stream of *task_id* here; its holder to :meth:`unfollow`, ``None`` when
        the store could not note it (the stream then counts on this replica only)."""
        holder = f"f:{secrets.token_hex(16)}"
        row = dict(
            scope=FOLLOW_SCOPE,
            subject=task_id,
            # The key wants a slot number: a random one, so streams of a task never meet.
            slot=secrets.randbelow(2**31),
            holder=holder,
            replica_id=self.registry.replica_id,
        )
        try:
            async with self.engine.begin() as conn:
                await guarded(conn.execute(insert(slots_table).values(**row)))
        except Exception as exc:  # an outage: a drop elsewhere may then cancel, as before
            logger.warning("could not note a stream of task %s: %s", task_id, type(exc).__name__)
            return None
        return holder

    async def unfollow(self, holder: str) -> None:
        """The stream noted as *holder* ended."""
        try:
            await self.slots.give_back(FOLLOW_SCOPE, holder)  # a row it never leased: deleted
        except Exception as exc:  # left behind: it stops counting when this replica dies
            logger.warning("could not drop the note of a stream: %s", type(exc).__name__)

    async def elsewhere(self, task_id: str) -> bool:
        """Whether a live replica other than this one streams *task_id* now."""
        found = exists().where(
            _S.scope == FOLLOW_SCOPE,
            _S.subject == task_id,
            _S.replica_id != self.registry.replica_id,
            _S.replica_id.in_(live_ids(self.registry.dead_cutoff())),
        )
        try:
            async with self.engine.connect() as conn:
                return bool(await guarded(conn.scalar(select(found))))
        except Exception as exc:  # unknown: the drop cancels, as it would in one process
            logger.warning("could not read the streams of task %s: %s", task_id, type(exc).__name__)
            return False
