"""Agents in two schemas of one PostgreSQL database start apart: one's start held up does
not hold up the other's (cluster mode).

A start installs its schema's notify trigger under a lock, as replicas of one schema may
race. That lock was one key for the whole database: an agent whose start waited inside it
(a lock of its own schema's tables held by a long transaction, a replica paused mid-start)
held every other schema's agents at their start until it ended.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url

from .._postgres import pg_schema_url
from ._helpers import settings
from .test_recovery import eventually

pytestmark = pytest.mark.postgres

#: a hang guard for the start that must not wait (it took under a second)
START_GUARD = 60.0


async def test_a_start_held_up_in_one_schema_does_not_hold_up_another(pg_url: str) -> None:
    first = open_stores(pg_url, settings(cluster=True))
    await first.start()  # its tables, the secret's among them
    await first.aclose()
    schema = pg_url.rsplit("schema=", 1)[1]
    engine = create_engine(parse_store_url(pg_url))
    held = open_stores(pg_url, settings(cluster=True))
    try:
        async with engine.connect() as blocker, engine.connect() as watcher:
            await blocker.begin()
            await blocker.execute(
                text(f"LOCK TABLE {schema}.apcore_a2a_secrets IN ACCESS EXCLUSIVE MODE")
            )
            start = asyncio.create_task(held.start())
            waiting = text(
                "SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                f"WHERE NOT l.granted AND n.nspname = '{schema}' "
                "AND c.relname = 'apcore_a2a_secrets'"
            )

            async def held_up() -> bool:
                return bool((await watcher.execute(waiting)).all())

            await eventually(held_up)
            async with pg_schema_url(agents=1) as other_url:
                other = open_stores(other_url, settings(cluster=True))
                try:
                    await asyncio.wait_for(other.start(), START_GUARD)  # was: waited
                finally:
                    await other.aclose()
            assert not start.done()
            await blocker.rollback()
            await start
    finally:
        await held.aclose()
        await engine.dispose()


async def test_a_stop_before_the_start_finished_frees_nothing_and_warns_nothing(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent stopped while its start was still waiting (above) never registered: it
    leased no quota slot, and its stop has none to free. It used to delete them anyway,
    from a table its start had not created yet, and log a WARNING about an outage."""
    stores = open_stores(pg_url, settings(cluster=True))  # a fresh schema: no tables yet
    with caplog.at_level("WARNING", logger="apcore_a2a"):
        await stores.aclose()
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == []
