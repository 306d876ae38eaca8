"""Only the agent's deployment hears its wake-ups (issue 40, item 8).

Any role with ``CONNECT`` can ``LISTEN`` on any channel. The replicas' channel used to be
``apcore_a2a_`` + md5 of the schema name, which anyone can compute, and each notification
names a task id. Now the channel carries a secret kept in a table of the store that other
roles cannot read; the trigger's body (readable by all) names the table, not the secret.
A role with ``CONNECT`` and ``USAGE`` on the schema listens on every channel it can
derive while a replica streams: it hears nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_execute, pg_schema_url
from .._support import TLS, cli_server
from ._a2a import EXTENSIONS

pytestmark = pytest.mark.postgres


def _countdown() -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"start": 5, "delay": 0.05}}],
        "metadata": {"skillId": "text.countdown"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": message}}  # fmt: skip


async def test_a_role_with_connect_hears_no_task_ids() -> None:
    spy = f"apcore_a2a_spy_{uuid.uuid4().hex[:8]}"
    async with pg_schema_url() as url:
        schema = url.rsplit("schema=", 1)[1]
        pg_execute(f"CREATE ROLE {spy} LOGIN")
        try:
            pg_execute(f"GRANT USAGE ON SCHEMA {schema} TO {spy}")
            args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
            with cli_server(args) as (base, _):
                heard: list[str] = []
                conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=spy, database=PG_DB)
                try:
                    # What the spy can read: the trigger's body (anyone can).
                    body = await conn.fetchval(
                        "SELECT prosrc FROM pg_proc p JOIN pg_namespace n "
                        "ON n.oid = p.pronamespace WHERE n.nspname = $1 "
                        "AND proname = 'apcore_a2a_task_events_notify_fn'",
                        schema,
                    )
                    guesses = {
                        "apcore_a2a_" + hashlib.md5(schema.encode()).hexdigest(),
                        "apcore_a2a_task_events",
                        *re.findall(r"apcore_a2a_\w+", body),
                    }
                    for channel in guesses:
                        await conn.add_listener(channel, lambda *args: heard.append(str(args[-1])))
                    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                        for _ in range(3):
                            response = await http.post(
                                base + "/", json=_countdown(), headers={"A2A-Version": "1.0"}
                            )
                            assert "TASK_STATE_COMPLETED" in response.text
                    await asyncio.sleep(1.0)
                    assert heard == [], f"heard {len(heard)} notifications, e.g. {heard[:2]}"
                    # The body names the secret's table, which the spy cannot read.
                    assert "apcore_a2a_secrets" in body
                    with pytest.raises(asyncpg.InsufficientPrivilegeError):
                        await conn.fetchval(f"SELECT value FROM {schema}.apcore_a2a_secrets")
                finally:
                    await conn.close()
                # The agent itself still hears them (as the superuser here can see).
                admin = await asyncpg.connect(
                    host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB,
                    server_settings={"search_path": schema},
                )  # fmt: skip
                try:
                    channel = await admin.fetchval(
                        "SELECT 'apcore_a2a_' || value FROM apcore_a2a_secrets"
                    )
                    listening = await admin.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                        f"apcore-a2a listen {schema}",
                    )
                finally:
                    await admin.close()
                assert channel not in guesses and listening == 1
        finally:
            pg_execute(f"REVOKE ALL ON SCHEMA {schema} FROM {spy}")
            pg_execute(f"DROP ROLE {spy}")
