"""Follow-up messages to a parked task, as the store sees them.

* A follow-up reads its stored task once (turn check, routing and the SDK's own load
  share the read), counted by a ``TaskStore`` object the agent is given.
* In cluster mode a turn claim (``apcore_a2a_task_turns``) is deleted once its wait is
  over, without retention: the table does not grow one row per continued wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task
from apcore import Registry

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server, free_port, running_server
from ..lifecycle._modules import Pay
from ._a2a import EXTENSIONS

V10 = {"A2A-Version": "1.0"}


class _CountingStore(InMemoryTaskStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        self.reads.append(task_id)
        return await super().get(task_id, context)  # type: ignore[arg-type]


def _message(data: dict[str, Any], *, skill: str = "", task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER"}
    message["parts"] = [{"data": data}]
    if skill:
        message["metadata"] = {"skillId": skill}
    if task_id:
        message["taskId"] = task_id
    return message


async def _send(http: httpx.AsyncClient, url: str, message: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = await http.post(url + "/", json=body, headers=V10)
    assert answer.status_code == 200, answer.text
    task: dict[str, Any] = answer.json()["result"]["task"]
    return task


async def test_a_follow_up_reads_its_stored_task_once() -> None:
    from apcore_a2a import A2AServerFactory

    registry = Registry()
    registry.register("shop.pay", Pay())
    store = _CountingStore()
    port = free_port()
    app, _ = A2AServerFactory(registry, environ={}, port=port, task_store=store).create()
    async with (
        running_server(app, port=port) as url,
        httpx.AsyncClient(timeout=20, verify=TLS) as http,
    ):
        parked = await _send(http, url, _message({"amount": 5}, skill="shop.pay"))
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        store.reads.clear()
        done = await _send(http, url, _message({"approved": True}, task_id=parked["id"]))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert store.reads == [parked["id"]]


@contextlib.contextmanager
def _replicas() -> Iterator[tuple[str, str, str]]:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(pg_schema_url(agents=2))
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--cluster"]
        a, _ = stack.enter_context(cli_server(args))
        b, _ = stack.enter_context(cli_server(args))
        yield a, b, url.rsplit("schema=", 1)[1]


async def _turn_rows(schema: str) -> int:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM {schema}.apcore_a2a_task_turns"))
    finally:
        await conn.close()


@pytest.mark.postgres
async def test_turn_claims_are_deleted_when_their_wait_ends() -> None:
    with _replicas() as (a, b, schema):
        async with httpx.AsyncClient(timeout=30, verify=TLS) as http:
            for _ in range(3):
                transfer = {"to": "acct-1", "amount": 5}
                parked = await _send(http, a, _message(transfer, skill="bank.transfer"))
                assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                done = await _send(http, b, _message({"approved": True}, task_id=parked["id"]))
                assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
        deadline = time.monotonic() + 10
        while (rows := await _turn_rows(schema)) > 0:
            assert time.monotonic() < deadline, f"{rows} turn claim(s) left behind"
            await asyncio.sleep(0.1)


async def test_a_late_release_leaves_the_claim_of_the_next_wait() -> None:
    """Replica A's claim of a wait is deleted once the task moves past it, in the background;
    when that runs after replica B claimed the task's next wait, B's claim stays: a third
    message cannot take the same wait."""
    from a2a.types import TaskState

    from apcore_a2a.storage import open_stores

    from ._helpers import ctx, make_task, settings
    from .test_recovery import put

    async with pg_schema_url(agents=2) as url:
        a = open_stores(url, settings(cluster=True))
        b = open_stores(url, settings(cluster=True))
        await a.start()
        await b.start()
        try:
            first = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
            await put(a, first)
            assert await a.turns.claim(first)
            # The message ran (on A) and the task asks again: a new wait, saved by B here.
            second = Task()
            second.CopyFrom(first)
            second.status.timestamp.GetCurrentTime()
            await put(b, second)
            assert await b.turns.claim(second)
            # A's listener sees the task past its claim only now, and deletes that claim.
            a.turns.saved(second, ctx())  # type: ignore[attr-defined]
            await a.turns.aclose()  # type: ignore[attr-defined]
            assert not await a.turns.claim(second), "the next wait was claimed twice"
        finally:
            await a.aclose()
            await b.aclose()
