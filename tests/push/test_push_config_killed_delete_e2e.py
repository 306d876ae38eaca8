"""A replica killed (SIGKILL) in the middle of deleting a push config registered from a
0.3 client: a real agent process on PostgreSQL.

Made to happen every time: the test's session locks the config's row, so the delete
waits at its row delete when the process is killed; the config stays stored. Before:
the delete forgot the config's records (its protocol version) first, so the config
stayed stored read as 1.0: 1.0 bodies to its 0.3 receiver from then on. The delete now
forgets them after the row, and only if no registration stored the config again.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import EXAMPLES, cli_server
from ._agent import rpc
from .test_push_config_delete_race_e2e import HOOK_03, SET_03, _parked, _until_waiting


async def test_a_0_3_config_whose_delete_died_keeps_its_version() -> None:
    asyncpg = pytest.importorskip("asyncpg")
    with pg_schema_url(agents=2) as url:
        schema = url.rsplit("schema=", 1)[1]
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args += ["--push-notifications", "--push-allow-insecure-urls"]
        async with httpx.AsyncClient(timeout=60) as client:
            with cli_server(args) as (a, pa):
                task_id = await _parked(client, a)
                config = {"taskId": task_id, "pushNotificationConfig": HOOK_03}
                assert "result" in await rpc(client, a, SET_03, config, version="0.3")
                session = await asyncpg.connect(
                    host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB
                )
                try:
                    await session.execute("BEGIN")
                    await session.execute(
                        f"SELECT 1 FROM {schema}.push_notification_configs "
                        "WHERE task_id = $1 AND config_id = 'hook' FOR UPDATE",
                        task_id,
                    )
                    delete = {"taskId": task_id, "id": "hook"}
                    method = "DeleteTaskPushNotificationConfig"
                    deleted = asyncio.ensure_future(rpc(client, a, method, delete))
                    await _until_waiting(1, deleted)
                    pa.kill9()
                    pa.wait()
                    await session.execute("ROLLBACK")
                    with pytest.raises(httpx.HTTPError):
                        await deleted
                    configs = f"SELECT count(*) FROM {schema}.push_notification_configs "
                    assert await session.fetchval(configs + "WHERE task_id = $1", task_id) == 1
                    query = (
                        f"SELECT protocol_version FROM {schema}.apcore_a2a_push_config_versions "
                    )
                    stored = await session.fetchval(query + "WHERE task_id = $1", task_id)
                    assert stored == "0.3"  # was: None, read as 1.0
                finally:
                    await session.close()
