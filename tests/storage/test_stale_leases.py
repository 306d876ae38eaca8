"""A replica whose heartbeats lag still serves a caller the slots it gave back (cluster
mode on PostgreSQL).

A lease given back waits :data:`~apcore_a2a.storage.quota_slots.LEASE_SECONDS` for the
caller's next request. Once the replica's heartbeat lags (``ReplicaRegistry.steady()``
is ``None``: another replica may soon count it dead and free its rows), such a lease is
no longer handed out from memory. Before, its row still counted against the caller until
the trim deleted it: a caller at its quota was refused (-32091) a slot that was free.

The heartbeat is made to lag by locking the replicas table against writes from the
test's own connection (reads go on: the take reads who is alive).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage.quota_slots import SqlQuotaSlots

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from .test_quota_slots_freed import CALLER, _replica
from .test_recovery import eventually

asyncpg = pytest.importorskip("asyncpg")


@asynccontextmanager
async def _heartbeats_held(pg_url: str, *slots: SqlQuotaSlots) -> AsyncIterator[None]:
    """Every heartbeat waits until the block ends; entered once no replica is steady."""
    schema = pg_url.rsplit("schema=", 1)[1]
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        async with db.transaction():
            await db.execute(f"LOCK TABLE {schema}.apcore_a2a_replicas IN EXCLUSIVE MODE")
            await eventually(lambda: all(s.registry.steady() is None for s in slots))
            yield
    finally:
        await db.close()


async def test_a_lagging_replica_serves_the_slot_its_caller_gave_back(pg_url: str) -> None:
    a, slots = await _replica(pg_url)
    try:
        assert await slots.take("stream", CALLER, "first", 1)
        async with _heartbeats_held(pg_url, slots):
            await slots.give_back("stream", "first")  # its row is leased for a second
            assert await slots.take("stream", CALLER, "next", 1)  # was: refused
            assert not await slots.take("stream", CALLER, "third", 1)  # the cap holds
        assert len(await slots.holders("stream", CALLER)) == 1
    finally:
        await a.aclose()


async def test_lagging_replicas_keep_the_cap_under_concurrent_takers(pg_url: str) -> None:
    """Two replicas, each with a lease given back, lag together (a stall of the shared
    database); twelve takes race on both: exactly the two free slots are served."""
    a, slots_a = await _replica(pg_url)
    b, slots_b = await _replica(pg_url)
    try:
        assert await slots_a.take("stream", CALLER, "a-first", 2)
        assert await slots_b.take("stream", CALLER, "b-first", 2)
        async with _heartbeats_held(pg_url, slots_a, slots_b):
            await slots_a.give_back("stream", "a-first")
            await slots_b.give_back("stream", "b-first")
            takes = [
                slots.take("stream", CALLER, f"{id(slots)}-{n}", 2)
                for n in range(6)
                for slots in (slots_a, slots_b)
            ]
            served = await asyncio.gather(*takes)
            assert sum(served) == 2, served  # was: 0
            assert len(await slots_a.holders("stream", CALLER)) == 2
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_lease_whose_check_lost_its_connection_is_not_held_for_ever(
    pg_url: str,
) -> None:
    """A take finding an idle lease reads whether its caller holds rows past the quota;
    the database cuts that read's connection (its backend ended while it waits on a
    lock). Before, the lease was out of the idle list but still known as held: neither
    trimmed nor freed as an orphan, its row counted against the caller until the replica
    stopped (a caller with a quota of 1 refused, -32091, on every replica)."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots = await _replica(pg_url)
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        assert await slots.take("stream", CALLER, "first", 1)
        await slots.give_back("stream", "first")  # an idle lease, for the next take
        async with db.transaction():
            await db.execute(f"LOCK TABLE {schema}.apcore_a2a_quota_slots IN ACCESS EXCLUSIVE MODE")
            take = asyncio.ensure_future(slots.take("stream", CALLER, "next", 1))
            waiting = (
                "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE NOT l.granted AND n.nspname = $1 AND c.relname = 'apcore_a2a_quota_slots'"
            )
            pids: list[int] = []

            async def blocked() -> bool:
                pids[:] = [row[0] for row in await db.fetch(waiting, schema)]
                return bool(pids)

            await eventually(blocked)
            for pid in pids:  # only the take's own session waits on this schema's table
                await db.execute("SELECT pg_terminate_backend($1)", pid)
            with pytest.raises(StoreUnavailableError):
                await take
        assert await slots.take("stream", CALLER, "again", 1)  # was: refused
        assert not await slots.take("stream", CALLER, "third", 1)  # the cap holds
    finally:
        await db.close()
        await a.aclose()
