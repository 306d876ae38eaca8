"""A replica ends the sessions of a replica it counts dead (PostgreSQL): a paused replica's
open transaction holds its locks with no timeout of the server's, and failing its tasks
waits for them (``ReplicaRegistry.end_sessions``). Only a refusal (the role may not end
them) stops it from trying again; before, any error did, for the life of the replica: a
session of its own ended mid-statement (two loaded replicas judging each other dead at
once) switched the ending off for good.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._replicas import REPLICA_APPLICATION, ReplicaRegistry

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from ._helpers import settings
from .test_recovery import eventually

asyncpg = pytest.importorskip("asyncpg")


async def test_a_failed_try_to_end_a_dead_replicas_sessions_is_tried_again(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    stores = open_stores(pg_url, settings(cluster=True))
    await stores.start()
    where = {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "database": PG_DB}
    paused = await asyncpg.connect(
        **where, server_settings={"application_name": REPLICA_APPLICATION + "paused"}
    )
    try:
        assert stores.engine is not None
        registry = ReplicaRegistry(
            stores.engine, heartbeat_interval=1, replica_timeout=5, replica_id="alive"
        )
        sync = stores.engine.sync_engine
        ends = 0

        def ended_here(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> Any:
            # The first try's session is ended by the server as it runs (as another
            # replica ending this one's sessions does): a real error, not a refusal.
            nonlocal ends
            if "pg_terminate_backend" in statement:
                ends += 1
                if ends == 1:
                    return "SELECT pg_terminate_backend(pg_backend_pid())", params
            return statement, params

        event.listen(sync, "before_cursor_execute", ended_here, retval=True)
        try:
            await registry.end_sessions("paused")
            assert not paused.is_closed() and await paused.fetchval("SELECT 1") == 1
            await registry.end_sessions("paused")  # the next death it meets: tried again
        finally:
            event.remove(sync, "before_cursor_execute", ended_here)
        assert ends == 2
        assert "ended 1 session(s) of dead replica paused" in caplog.text

        async def gone() -> bool:
            named = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1"
            return await watcher.fetchval(named, REPLICA_APPLICATION + "paused") == 0

        watcher = await asyncpg.connect(**where)
        try:
            await eventually(gone)  # its session was ended
        finally:
            await watcher.close()
    finally:
        await paused.close()
        await stores.aclose()


async def test_a_refusal_to_end_them_is_not_asked_again(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    stores = open_stores(pg_url, settings(cluster=True))
    await stores.start()
    try:
        assert stores.engine is not None
        async with stores.engine.begin() as conn:  # the server's answer to a role without
            await conn.exec_driver_sql(  # the right to end that replica's sessions
                "CREATE FUNCTION refused() RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'permission denied to terminate process' "
                "USING ERRCODE = '42501'; END $$"
            )
        registry = ReplicaRegistry(
            stores.engine, heartbeat_interval=1, replica_timeout=5, replica_id="alive"
        )
        sync = stores.engine.sync_engine
        tries = 0

        def refused(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> Any:
            nonlocal tries
            if "pg_terminate_backend" in statement:
                tries += 1
                return "SELECT refused()", {}
            return statement, params

        event.listen(sync, "before_cursor_execute", refused, retval=True)
        try:
            await registry.end_sessions("paused")
            await registry.end_sessions("other")
        finally:
            event.remove(sync, "before_cursor_execute", refused)
        assert tries == 1  # refused for good: the next death is not asked about
        assert caplog.text.count("cannot end the sessions of dead replicas (") == 1
    finally:
        await stores.aclose()
