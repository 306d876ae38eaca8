"""One push config id registered on two cluster replicas at the same moment (PostgreSQL).

Made to happen every time: the test's own session holds an uncommitted row of that id, so
both registrations have counted the config new and taken a cap slot each when they reach
the table; the session then rolls back and both write. Before: the SDK's store inserted
twice and one registration was answered -32603 Internal error
(``upstream/push_config_upserts.py``), and when both were stored the config held two of
its task's ``push_max_configs_per_task`` slots until deleted, so the task could register
one config fewer (``storage/quota_slots.py`` ``settle``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from apcore import Registry

from apcore_a2a import A2AServerFactory
from tests._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from tests._support import TLS, running_server
from tests.lifecycle._modules import Pay

V1 = {"A2A-Version": "1.0"}
HOOK = "http://127.0.0.1:9/hook"
CAP = 4


@contextlib.asynccontextmanager
async def _replica(store: str) -> AsyncIterator[str]:
    registry = Registry()
    registry.register("shop.pay", Pay())
    app, _ = A2AServerFactory(
        registry,
        environ={},
        name="payer",
        task_store=store,
        cluster=True,
        push_notifications=True,
        push_allow_insecure_urls=True,
        push_max_configs_per_task=CAP,
    ).create()
    async with running_server(app) as url:
        yield url


async def _rpc(http: httpx.AsyncClient, url: str, method: str, params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return (await http.post(url + "/", json=body, headers=V1)).json()


async def test_one_config_registered_on_two_replicas_at_once_is_stored_once() -> None:
    asyncpg = pytest.importorskip("asyncpg")

    async with pg_schema_url(agents=2) as store:
        schema = store.rsplit("schema=", 1)[1]
        async with (
            _replica(store) as a,
            _replica(store) as b,
            httpx.AsyncClient(timeout=60, verify=TLS) as http,
        ):
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"amount": 5}}],
                "metadata": {"skillId": "shop.pay"},
            }
            parked = await _rpc(http, a, "SendMessage", {"message": message})
            task_id = parked["result"]["task"]["id"]
            session = await asyncpg.connect(
                host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB
            )
            try:
                await session.execute("BEGIN")
                await session.execute(
                    f"INSERT INTO {schema}.push_notification_configs (task_id, config_id, "
                    "config_data) VALUES ($1, 'hook', 'x')",
                    task_id,
                )
                config = {"taskId": task_id, "id": "hook", "url": HOOK}
                create = "CreateTaskPushNotificationConfig"
                both = asyncio.gather(*(_rpc(http, u, create, config) for u in (a, b)))
                await _until_blocked(session, 2, both)
                await session.execute("ROLLBACK")
                answers = await both
            finally:
                await session.close()
            assert [answer.get("result", answer)["id"] for answer in answers] == [
                "hook",
                "hook",
            ], answers
            # One config stored, holding one slot: CAP - 1 more fit, the next is refused.
            added = []
            for n in range(CAP):
                config = {"taskId": task_id, "id": f"n{n}", "url": HOOK}
                answer = await _rpc(http, (a, b)[n % 2], create, config)
                added.append(answer["error"]["code"] if "error" in answer else "added")
            assert added == ["added"] * (CAP - 1) + [-32091], added
            listed = await _rpc(http, b, "ListTaskPushNotificationConfigs", {"taskId": task_id})
            ids = sorted(c["id"] for c in listed["result"]["configs"])
            assert ids == ["hook", *(f"n{n}" for n in range(CAP - 1))], listed


async def _until_blocked(session: Any, count: int, running: asyncio.Future[Any]) -> None:
    """Wait until *count* other sessions wait for a lock *session*'s transaction holds."""
    import asyncpg

    pid = session.get_server_pid()
    query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
    probe = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
    try:
        deadline = time.monotonic() + 60  # a hang guard
        while await probe.fetchval(query, pid) < count:
            assert not running.done(), f"a registration never waited: {running.result()!r}"
            assert time.monotonic() < deadline, "the registrations never met the held row"
            await asyncio.sleep(0.02)
    finally:
        await probe.close()
