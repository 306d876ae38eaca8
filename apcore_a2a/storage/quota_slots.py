"""Quota slots in the shared database: per-caller limits that hold across processes.

A limit of N for one subject (a caller key) is N numbered slots. Taking one inserts the
lowest free slot number in one statement, and the primary key makes that atomic: of two
processes racing for one slot, one insert wins and the other tries the next free slot, or
finds none and is refused. So N replicas (or ``workers``) together never hand out more
than N, where counting first and creating after would let every racer through.

A slot taken for the life of a request or a stream names the replica that took it and is
freed when that replica is found dead (checked when a subject is full). A slot renamed to
a lasting holder (a task id) names no replica: it lives until that holder gives it back.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, String, Table, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from ._replicas import ReplicaRegistry
from ._tables import METADATA, replicas_table

__all__ = ["SqlQuotaSlots", "slots_table"]

slots_table = Table(
    "apcore_a2a_quota_slots",
    METADATA,
    Column("scope", String(16), primary_key=True),
    Column("subject", String(255), primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("replica_id", String(64), nullable=True),
    Index("ix_apcore_a2a_quota_slots_holder", "scope", "holder"),
)

# The lowest free slot below :limit, inserted unless another process took it meanwhile.
_TAKE = text(
    """
    WITH RECURSIVE n(slot) AS (SELECT 0 UNION ALL SELECT slot + 1 FROM n WHERE slot + 1 < :limit)
    INSERT INTO apcore_a2a_quota_slots (scope, subject, slot, holder, replica_id)
    SELECT CAST(:scope AS VARCHAR), CAST(:subject AS VARCHAR), n.slot,
           CAST(:holder AS VARCHAR), CAST(:replica AS VARCHAR)
    FROM n
    WHERE NOT EXISTS (
        SELECT 1 FROM apcore_a2a_quota_slots s
        WHERE s.scope = :scope AND s.subject = :subject AND s.slot = n.slot
    )
    ORDER BY n.slot LIMIT 1
    ON CONFLICT DO NOTHING
    RETURNING slot
    """
)


class SqlQuotaSlots:
    """Quota slots of one cluster, kept in ``apcore_a2a_quota_slots``."""

    def __init__(self, engine: AsyncEngine, registry: ReplicaRegistry) -> None:
        self.engine = engine
        self.registry = registry

    async def take(self, scope: str, subject: str, holder: str, limit: int) -> bool:
        """Take one of *subject*'s *limit* slots for *holder*; ``False`` when all are taken."""
        params = {
            "scope": scope,
            "subject": subject,
            "holder": holder,
            "replica": self.registry.replica_id,
            "limit": limit,
        }
        reclaimed = False
        # Each lost race means another holder got a slot, so this ends within limit rounds.
        for _ in range(limit + 2):
            async with self.engine.begin() as conn:
                if (await conn.execute(_TAKE, params)).first() is not None:
                    return True
                taken = (
                    await conn.execute(
                        select(func.count()).where(
                            slots_table.c.scope == scope, slots_table.c.subject == subject
                        )
                    )
                ).scalar_one()
            if taken < limit:
                continue  # lost a race for a slot that was free: try the next one
            if reclaimed or not await self._reclaim(scope, subject):
                return False
            reclaimed = True
        return False

    async def rename(self, scope: str, old: str, new: str) -> None:
        """Hand *old*'s slot to *new*, which keeps it until it gives it back."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(slots_table)
                .where(slots_table.c.scope == scope, slots_table.c.holder == old)
                .values(holder=new, replica_id=None)
            )

    async def give_back(self, scope: str, holder: str) -> None:
        """Free the slot *holder* took (nothing when it holds none)."""
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(slots_table).where(
                    slots_table.c.scope == scope, slots_table.c.holder == holder
                )
            )

    async def holders(self, scope: str, subject: str) -> list[str]:
        """The holders of *subject*'s slots."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(slots_table.c.holder).where(
                    slots_table.c.scope == scope, slots_table.c.subject == subject
                )
            )
            return [row[0] for row in rows]

    async def _reclaim(self, scope: str, subject: str) -> bool:
        """Free *subject*'s slots held by dead replicas; whether any was."""
        live = select(replicas_table.c.replica_id).where(
            replicas_table.c.heartbeat_at >= self.registry.live_cutoff()
        )
        async with self.engine.begin() as conn:
            result = await conn.execute(
                delete(slots_table).where(
                    slots_table.c.scope == scope,
                    slots_table.c.subject == subject,
                    slots_table.c.replica_id.is_not(None),
                    slots_table.c.replica_id.not_in(live),
                )
            )
        return bool(result.rowcount)
