"""A replica ends the sessions of a replica it counts dead (PostgreSQL): a paused replica's
open transaction holds its locks with no timeout of the server's, and failing its tasks
waits for them (``ReplicaRegistry.end_sessions``). Only a refusal (the role may not end
them) stops it from trying again; before, any error did, for the life of the replica: a
session of its own ended mid-statement (two loaded replicas judging each other dead at
once) switched the ending off for good.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._replicas import REPLICA_APPLICATION, ReplicaRegistry

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from ._helpers import settings
from .test_recovery import eventually


@contextlib.contextmanager
def _tries(engine: Any, instead: Callable[[int], str | None]) -> Iterator[list[int]]:
    """Count a replica's tries to end sessions on *engine* (the list's one item); the
    *n*-th runs the statement ``instead(n)`` (no parameters) where that is not ``None``."""
    tries = [0]

    def rewrite(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> Any:
        if "pg_terminate_backend" not in statement:
            return statement, params
        tries[0] += 1
        replaced = instead(tries[0])
        return (statement, params) if replaced is None else (replaced, {})

    sync = engine.sync_engine
    event.listen(sync, "before_cursor_execute", rewrite, retval=True)
    try:
        yield tries
    finally:
        event.remove(sync, "before_cursor_execute", rewrite)


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
        # The first try's session is ended by the server as it runs (as another replica
        # ending this one's sessions does): a real error, not a refusal.
        own_end = "SELECT pg_terminate_backend(pg_backend_pid())"
        with _tries(stores.engine, lambda n: own_end if n == 1 else None) as tries:
            await registry.end_sessions("paused")
            assert not paused.is_closed() and await paused.fetchval("SELECT 1") == 1
            await registry.end_sessions("paused")  # the next death it meets: tried again
        assert tries == [2]
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
        with _tries(stores.engine, lambda n: "SELECT refused()") as tries:
            await registry.end_sessions("paused")
            await registry.end_sessions("other")
        assert tries == [1]  # refused for good: the next death is not asked about
        assert caplog.text.count("cannot end the sessions of dead replicas (") == 1
    finally:
        await stores.aclose()
