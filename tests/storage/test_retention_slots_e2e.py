"""Retention frees the quota slot of a task it deletes, when the task's end could not
(cluster mode on PostgreSQL, a real agent process).

A task that finishes gives its slot of the caller's ``max_unfinished_tasks_per_caller``
back by deleting the row named after it; when the database drops that delete (an outage,
here a trigger ending the session), the row stays. The caller's recheck at its quota
frees it while the finished task is stored, but skips a task it cannot find (in cluster
mode, maybe not written yet by another replica). Retention deleted the task and kept the
row: the caller was refused -32091 for as long as the database was kept.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, V1, _send
from .test_turn_takeover_e2e import _args, _transfer

asyncpg = pytest.importorskip("asyncpg")

QUOTA_EXCEEDED = -32091


async def _kill_task_slot_deletes(db: Any, schema: str, on: bool) -> None:
    """While *on*, a delete of a task-quota slot named after its task loses its connection."""
    table = f"{schema}.apcore_a2a_quota_slots"
    if not on:
        await db.execute(f"DROP TRIGGER kill_task_slot_deletes ON {table}")
        return
    await db.execute(f"""
        CREATE FUNCTION {schema}.kill_task_slot_deletes() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN OLD; END $$;
        CREATE TRIGGER kill_task_slot_deletes BEFORE DELETE ON {table} FOR EACH ROW
        WHEN (OLD.scope = 'task' AND OLD.holder NOT LIKE 'r:%')
        EXECUTE FUNCTION {schema}.kill_task_slot_deletes();
        """)


async def test_retention_frees_the_slot_of_a_task_whose_end_could_not() -> None:
    env = {
        **ENV,
        "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": "1",
        "A2A_TASK_RETENTION_SECONDS": "1",
    }
    with pg_schema_url(agents=1) as url, cli_server(_args(url), env=env) as (a, _pa):
        schema = url.rsplit("schema=", 1)[1]
        db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                parked = (await _send(http, a, _transfer()))["result"]["task"]
                assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
                await _kill_task_slot_deletes(db, schema, True)
                body = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask"}
                body["params"] = {"id": parked["id"]}
                canceled = (await http.post(a + "/", json=body, headers=V1)).json()
                assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
                await _kill_task_slot_deletes(db, schema, False)
                stored = f"SELECT count(*) FROM {schema}.tasks WHERE id = $1"
                deadline = time.monotonic() + 60  # a hang guard: purged after about 1 s
                while await db.fetchval(stored, parked["id"]):
                    assert time.monotonic() < deadline, "retention never deleted the task"
                    await asyncio.sleep(0.1)
                answer = await _send(http, a, {**_transfer(), "messageId": uuid.uuid4().hex})
                assert "result" in answer, answer  # was: -32091
        finally:
            await db.close()
