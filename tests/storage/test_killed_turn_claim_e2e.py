"""A replica killed (SIGKILL) after it claimed a parked task's wait for a follow-up, before
it stored the task ``working``: two agent processes on one PostgreSQL schema.

Made to happen every time: the test's session locks the task's row, so A's follow-up has
claimed the wait (``apcore_a2a_task_turns``) and waits to write ``working`` when A is
killed. Before: the task stayed stored ``input-required`` in that same wait and no live
replica continued it (a claim named no replica, so none could tell it was a dead one's):
every later follow-up, on any replica, was refused as busy ("another message is already
continuing it") for as long as the task was kept; only a cancel ended it. A claim now
names its replica (``apcore_a2a_task_turn_claimants``, in the same transaction), and one
no live replica holds is taken over: B continues the task once A counts as dead.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import EXAMPLES, TLS, ServerProcess, cli_server

ENV = {
    "A2A_CLUSTER_HEARTBEAT_INTERVAL": "0.5",
    "A2A_CLUSTER_REPLICA_TIMEOUT": "3",
    "A2A_CLUSTER_POLL_INTERVAL": "0.1",
}
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
def replicas() -> Iterator[tuple[tuple[str, ServerProcess], str, str]]:
    with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args.append("--cluster")
        with cli_server(args, env=ENV) as a, cli_server(args, env=ENV) as (b, _pb):
            yield a, b, url.rsplit("schema=", 1)[1]


async def _send(http: httpx.AsyncClient, base: str, message: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return (await http.post(base + "/", json=body, headers=V1)).json()


def _approve(task_id: str) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "taskId": task_id,
        "parts": [{"text": "approve"}],
    }


async def test_a_wait_claimed_by_a_killed_replica_is_continued_on_another(
    replicas: tuple[tuple[str, ServerProcess], str, str],
) -> None:
    asyncpg = pytest.importorskip("asyncpg")
    (a, pa), b, schema = replicas
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": {"to": "bob", "amount": 5}}],
            "metadata": {"skillId": "bank.transfer"},
        }
        parked = (await _send(http, a, message))["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
        session = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            await session.execute("BEGIN")
            await session.execute(
                f"SELECT 1 FROM {schema}.tasks WHERE id = $1 FOR UPDATE", parked["id"]
            )
            follow_up = asyncio.ensure_future(_send(http, a, _approve(parked["id"])))
            claimed = f"SELECT count(*) FROM {schema}.apcore_a2a_task_turns WHERE task_id = $1"
            deadline = time.monotonic() + 60  # a hang guard
            while not await session.fetchval(claimed, parked["id"]):
                assert not follow_up.done(), follow_up.result()
                assert time.monotonic() < deadline, "A never claimed the wait"
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)  # A goes on to its write of working, and waits
            pa.kill9()
            pa.wait()
            await session.execute("ROLLBACK")
        finally:
            await session.close()
        with pytest.raises(httpx.HTTPError):
            await follow_up
        answer: Any = None
        deadline = time.monotonic() + 30  # A counts as dead after 3 s
        while time.monotonic() < deadline:
            answer = await _send(http, b, _approve(parked["id"]))
            if "result" in answer:
                break
            await asyncio.sleep(0.5)
        assert "result" in answer, answer
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
