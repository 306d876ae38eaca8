"""An answer that a cancel overtakes after it claimed its task's wait, on PostgreSQL (cluster
mode), made to happen every time: the test holds the answer's turn-claim row until the
cancel has finished the task.

The answer is refused as for a finished task (-32004), and the run the SDK set up for it,
never started, leaves nothing behind: no asyncio task destroyed while pending ("Task was
destroyed but it is pending!"), no OpenTelemetry "Failed to detach context", nothing
pending when the server has stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage.turns import turn_of
from tests._sdk import make_client, request
from tests.bindings._outputs_agent import INPUT_REQUIRED, build_executor, send, text_request
from tests.lifecycle._agent import assert_no_leaks

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import free_port, running_server


async def _until_blocked_by(conn: asyncpg.Connection) -> None:
    """Wait until another session waits for a lock *conn*'s transaction holds."""
    pid = conn.get_server_pid()
    deadline = time.monotonic() + 60
    blocked = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
    while not await conn.fetchval(blocked, pid):
        assert time.monotonic() < deadline, "the answer never waited for its turn claim"
        await asyncio.sleep(0.02)


async def test_an_answer_a_cancel_overtook_leaves_no_task_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    async with pg_schema_url() as store:
        schema = store.rsplit("schema=", 1)[1]
        port = free_port()
        app, _card = A2AServerFactory(
            build_executor(), environ={}, port=port, task_store=store, cluster=True
        ).create()
        async with running_server(app, port=port) as url:
            client = await make_client(url, "JSONRPC", "1.0")
            conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
            try:
                parked = await send(client, request("out.trip", {"origin": "SFO"}))
                assert parked.status.state == INPUT_REQUIRED
                stored = await client.get_task(GetTaskRequest(id=parked.id))
                holding = conn.transaction()
                await holding.start()
                # The answer's claim of this wait inserts the same key: it waits for us.
                await conn.execute(
                    f"INSERT INTO {schema}.apcore_a2a_task_turns (task_id, turn) VALUES ($1, $2)",
                    parked.id,
                    turn_of(stored)[:64],
                )
                reply = text_request(None, "JFK", task_id=parked.id)
                answer = asyncio.ensure_future(send(client, reply))
                await _until_blocked_by(conn)
                canceled = await client.cancel_task(CancelTaskRequest(id=parked.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                await holding.rollback()  # the answer's claim goes through, on a canceled task
                with pytest.raises(UnsupportedOperationError, match="terminal state"):
                    await answer
                stored = await client.get_task(GetTaskRequest(id=parked.id))
                assert stored.status.state == TaskState.TASK_STATE_CANCELED
                held = [m.message_id for m in stored.history]
                assert reply.message.message_id not in held
            finally:
                await conn.close()
                await client.close()
    await assert_no_leaks(caplog)
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert problems == []
