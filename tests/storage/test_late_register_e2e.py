"""A replica whose registration was answered late has not beaten since the answer
(PostgreSQL, a real lock holding the insert of its heartbeat row).

Its row's heartbeat is the database's now when the insert ran, not when the answer came:
answered more than the replica timeout later (the process paused, or the insert waited),
the others may count it dead at once and free its quota leases. Before: ``register()``
counted as a beat at its answer, so the replica took itself for steady and handed out
again leases the others may have freed (``storage/quota_slots.py``).
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._replicas import ReplicaRegistry

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from ._helpers import settings

asyncpg = pytest.importorskip("asyncpg")

#: a replica timeout, and the time its registration's insert waits (longer)
TIMEOUT, HELD = 1.0, 2.0


async def test_a_registration_answered_late_is_no_fresh_beat(pg_url: str) -> None:
    stores = open_stores(pg_url, settings(cluster=True))
    await stores.start()
    schema = pg_url.rsplit("schema=", 1)[1]
    db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        assert stores.engine is not None
        late = ReplicaRegistry(
            stores.engine, heartbeat_interval=0.2, replica_timeout=TIMEOUT, replica_id="late"
        )
        # An insert of the same key, uncommitted: the registration's waits for its end.
        await db.execute("BEGIN")
        await db.execute(f"INSERT INTO {schema}.apcore_a2a_replicas VALUES ('late', 'h', 1, 0, 0)")
        registering = asyncio.ensure_future(late.register())
        await asyncio.sleep(HELD)
        await db.execute("ROLLBACK")
        await registering
        async with stores.engine.connect() as conn:
            age = (
                await conn.execute(
                    text(
                        "SELECT extract(epoch from clock_timestamp()) - heartbeat_at "
                        "FROM apcore_a2a_replicas WHERE replica_id = 'late'"
                    )
                )
            ).scalar_one()
        assert age > TIMEOUT  # the others' judgement: dead already
        assert late.steady() is None  # was: steady since the answer
    finally:
        await db.close()
        await stores.aclose()
