"""A take at its caller's quota meeting the trim of that caller's idle lease is served
(cluster mode on PostgreSQL).

A lease given back waits a second for the caller's next request, then the trim deletes
its row. A take arriving while that delete is under way no longer finds the lease, counts
the row (not deleted yet) and frees the replica's rows it no longer holds: that delete
waits for the trim's, then finds the row gone. Before, the take read that as "nothing
freed" and refused the caller (-32091) a slot that was free by then.

The trim's delete is held open by a trigger that sleeps after it (the test's device).
"""

from __future__ import annotations

import asyncio

import pytest

from apcore_a2a.storage._replicas import REPLICA_APPLICATION

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from .test_recovery import eventually
from .test_stale_leases import CALLER, _replica

asyncpg = pytest.importorskip("asyncpg")

#: the caller's quota: a take tries one random slot first, which is the one being freed
#: (and so waits for that delete, then takes it) once in QUOTA
QUOTA = 20


async def test_a_take_meeting_the_trim_of_an_idle_lease_is_served(pg_url: str) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    table = f"{schema}.apcore_a2a_quota_slots"
    a, slots = await _replica(pg_url)
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        await db.execute(
            f"""
            CREATE FUNCTION {schema}.slow_trim() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN PERFORM pg_sleep(1); RETURN OLD; END $$;
            CREATE TRIGGER slow_trim AFTER DELETE ON {table} FOR EACH ROW
            WHEN (OLD.scope = 'stream') EXECUTE FUNCTION {schema}.slow_trim();
            """
        )
        for n in range(QUOTA):  # the caller at its quota, one of them ending now
            assert await slots.take("stream", CALLER, f"stream-{n}", QUOTA)
        await slots.give_back("stream", "stream-0")
        trimming = (
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
            "AND wait_event = 'PgSleep'"
        )
        mine = REPLICA_APPLICATION + slots.registry.replica_id
        await eventually(lambda: db.fetchval(trimming, mine))  # its row deleted, uncommitted
        assert await slots.take("stream", CALLER, "next", QUOTA)  # was: refused (19 in 20)
        await db.execute(f"DROP TRIGGER slow_trim ON {table}")
        assert len(await slots.holders("stream", CALLER)) == QUOTA
        assert not await slots.take("stream", CALLER, "another", QUOTA)  # the cap holds
    finally:
        await db.close()
        await asyncio.shield(a.aclose())
