"""A 0.3 push config registration whose database connection is lost after the config was
stored (at its slot's settle, ``SqlQuotaSlots.settle``): a real agent process in cluster
mode on PostgreSQL.

Made to happen every time: the test's session holds the settle's turn row, so the
registration waits there, and the test ends that waiting session. The call is answered
as the store being unavailable; the config stays stored. Before: the failed
registration forgot the config's records, its protocol version with them, so the stored
config read as 1.0 (1.0 bodies to its 0.3 receiver). Now it forgets only the records of
a config not stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import time

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import EXAMPLES, cli_server
from ._agent import rpc
from .test_push_config_delete_race_e2e import HOOK_03, SET_03, _parked

BLOCKED = "SELECT pid FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0"


async def test_a_0_3_config_stored_before_an_outage_keeps_its_version() -> None:
    asyncpg = pytest.importorskip("asyncpg")
    with pg_schema_url() as url:
        schema = url.rsplit("schema=", 1)[1]
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args += ["--cluster", "--push-notifications", "--push-allow-insecure-urls"]
        async with httpx.AsyncClient(timeout=60) as client:
            with cli_server(args) as (a, _pa):
                task_id = await _parked(client, a)
                holder = "c:" + hashlib.sha256(f"{task_id}\nhook".encode()).hexdigest()
                session = await asyncpg.connect(
                    host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB
                )
                try:
                    await session.execute("BEGIN")
                    await session.execute(
                        f"INSERT INTO {schema}.apcore_a2a_quota_slots "
                        "(scope, subject, slot, holder) VALUES ('push:turn', $1, 0, '')",
                        holder,
                    )
                    config = {"taskId": task_id, "pushNotificationConfig": HOOK_03}
                    answer = asyncio.ensure_future(rpc(client, a, SET_03, config, version="0.3"))
                    deadline = time.monotonic() + 60  # a hang guard
                    while not (pids := await session.fetch(BLOCKED)):
                        assert not answer.done(), answer.result()
                        assert time.monotonic() < deadline, "the settle never waited"
                        await asyncio.sleep(0.02)
                    for row in pids:
                        await session.execute("SELECT pg_terminate_backend($1)", row["pid"])
                    await session.execute("ROLLBACK")
                    error = (await answer).get("error")
                    assert error is not None and error["code"] != -32603, error
                    configs = f"SELECT count(*) FROM {schema}.push_notification_configs "
                    assert await session.fetchval(configs + "WHERE task_id = $1", task_id) == 1
                    query = (
                        f"SELECT protocol_version FROM {schema}.apcore_a2a_push_config_versions "
                    )
                    stored = await session.fetchval(query + "WHERE task_id = $1", task_id)
                    assert stored == "0.3"  # was: None, read as 1.0
                finally:
                    await session.close()
