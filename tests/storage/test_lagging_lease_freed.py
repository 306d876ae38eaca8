"""A stream slot freed as a dead replica's right after its replica's lagging check handed
it out is counted again once that replica beats again (cluster mode on PostgreSQL, two
replicas).

A's heartbeat is held (its row in ``apcore_a2a_replicas`` locked by the test's own
session; B beats on). A's caller gave back its only stream slot (a quota of 1), and its
next stream on A is served by the lagging check: the row is found still there. B then
counts A dead, and a stream of the same caller on B frees A's rows and is served. Before,
A never looked at the row again: once its beats resumed, the caller held two streams
against a quota of 1 (one row in the table, so B served a third as soon as its own
ended). Now a replica whose beats resume after a break checks the rows of the slots it
leases: one found gone is taken again, below the quota if a slot is free, else past it
(counted, as a task whose retried rename found the quota full), and the caller's next
stream waits until it is back under.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from apcore_a2a.storage.quota_slots import SqlQuotaSlots

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from .test_quota_slots_freed import CALLER, _replica
from .test_recovery import eventually

asyncpg = pytest.importorskip("asyncpg")


@asynccontextmanager
async def _beats_held(pg_url: str, slots: SqlQuotaSlots) -> AsyncIterator[None]:
    """*slots*' replica's heartbeats wait until the block ends (the others' go on);
    entered once it is no longer steady."""
    schema = pg_url.rsplit("schema=", 1)[1]
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        async with db.transaction():
            await db.execute(
                f"SELECT 1 FROM {schema}.apcore_a2a_replicas WHERE replica_id = $1 FOR UPDATE",
                slots.registry.replica_id,
            )
            await eventually(lambda: slots.registry.steady() is None)
            yield
    finally:
        await db.close()


async def test_a_lease_freed_as_dead_after_the_lagging_check_is_counted_again(
    pg_url: str,
) -> None:
    a, slots_a = await _replica(pg_url)
    b, slots_b = await _replica(pg_url)
    try:
        assert await slots_a.take("stream", CALLER, "first", 1)
        async with _beats_held(pg_url, slots_a):
            await slots_a.give_back("stream", "first")
            assert await slots_a.take("stream", CALLER, "a-stream", 1)  # the lagging check
            # B counts A dead: at the quota, its take frees A's row and is served.
            await eventually(lambda: slots_b.take("stream", CALLER, "b-stream", 1))
        # A beats again: the row of its stream is taken again (past the quota: B's holds it).
        await eventually(lambda: _held(slots_b, 2), timeout=10)  # was: 1 for good
        await slots_b.give_back("stream", "b-stream")  # B's stream ends: A's still counts
        assert not await slots_b.take("stream", CALLER, "b-next", 1)  # was: served
        await slots_a.give_back("stream", "a-stream")
        await eventually(lambda: slots_b.take("stream", CALLER, "b-last", 1))
    finally:
        await a.aclose()
        await b.aclose()


async def _held(slots: SqlQuotaSlots, count: int) -> bool:
    return len(await slots.holders("stream", CALLER)) == count


async def test_two_recounts_of_a_freed_lease_take_it_again_once(pg_url: str) -> None:
    """A's beats break twice while the database holds the recount the first resumption
    started (the quota slots table locked against writes by the test's own session): two
    recounts are under way for the same lease, whose row was freed meanwhile. Before, both
    found no row and each took one: the caller's one stream counted twice (its quota of 2
    full) until it ended."""
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots = await _replica(pg_url)
    locker = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    watcher = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)

    async def waiting() -> int:
        """How many statements wait for the locked table."""
        query = (
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE NOT l.granted AND n.nspname = $1 AND c.relname = 'apcore_a2a_quota_slots'"
        )
        return int(await watcher.fetchval(query, schema))

    try:
        assert await slots.take("stream", CALLER, "stream", 2)
        [row] = await slots.holders("stream", CALLER)
        table = f"{schema}.apcore_a2a_quota_slots"
        async with locker.transaction():
            await locker.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
            await locker.execute(f"DELETE FROM {table} WHERE holder = $1", row)  # freed
            for recounts in (1, 2):  # each break of A's beats, once over, starts one
                async with _beats_held(pg_url, slots):
                    pass
                await eventually(lambda n=recounts: _recounts() == n)
            await eventually(waiting)  # the first at the database
            await asyncio.sleep(0.3)  # the second there too, if it goes there now
        await eventually(lambda: _recounts() == 0)
        assert len(await slots.holders("stream", CALLER)) == 1  # was: 2
        assert await slots.take("stream", CALLER, "second", 2)  # was: refused (2 rows held)
    finally:
        await locker.close()
        await watcher.close()
        await a.aclose()


def _recounts() -> int:
    """How many recounts of a replica's leases are under way."""
    return sum("SqlQuotaSlots._recount" in repr(t.get_coro()) for t in asyncio.all_tasks())
