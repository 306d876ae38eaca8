"""A refused follow-up never strands its task (issue 40; found after items 2-4 landed).

A message on a task parked in ``input-required`` claims the task's wait (one message per
wait, ``storage/turns.py``). Before: a follow-up refused after that claim (its context id
is not the task's, the ACL now denies its caller, the skill was disabled) kept the claim,
so every later message, the right answer included, got "Task is busy" and the task could
never be continued. Now the refused message gives the wait back: the task stays parked,
and a good answer continues it. On every store: memory, SQLite and PostgreSQL, alone and
in cluster mode (where the claims are rows shared by the replicas).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from apcore import ACL, ACLRule, Executor, Registry, ToggleState

from apcore_a2a import A2AApprovalHandler, A2AServerFactory
from tests._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from tests._support import TLS, running_server
from tests.lifecycle._modules import Pay

V1 = {"A2A-Version": "1.0"}
PAY = "shop.pay"


@pytest.fixture(params=["memory", "sqlite", "postgresql", "sqlite-cluster", "postgresql-cluster"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The settings of one task store."""
    kind = str(request.param)
    cluster = kind.endswith("-cluster")
    if kind == "memory":
        yield {"task_store": "memory://"}
    elif kind.startswith("sqlite"):
        yield {"task_store": f"sqlite:///{tmp_path / 'tasks.db'}", "cluster": cluster}
    else:
        if cluster:
            pytest.importorskip("asyncpg")
        with pg_schema_url() as url:
            yield {"task_store": url, "cluster": cluster}


def _message(data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": data}], **fields}


async def _rpc(http: httpx.AsyncClient, message: dict[str, Any], **params: Any) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, **params},
    }
    answer = await http.post("/", json=body, headers=V1)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


async def _state(http: httpx.AsyncClient, task_id: str) -> str:
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    task = (await http.post("/", json=body, headers=V1)).json()["result"]
    return str(task["status"]["state"])


async def test_a_refused_follow_up_leaves_the_task_waiting_for_its_answer(
    store: dict[str, Any],
) -> None:
    registry = Registry()
    registry.register(PAY, Pay())
    acl = ACL(rules=[ACLRule(callers=["@external"], targets=["*"], effect="allow")])
    toggles = ToggleState()
    executor = Executor(
        registry, acl=acl, approval_handler=A2AApprovalHandler(), toggle_state=toggles
    )
    app, _ = A2AServerFactory(executor, environ={}, name="payer", **store).create()
    async with (
        running_server(app) as url,
        httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http,
    ):
        asked = await _rpc(http, _message({"amount": 5}, metadata={"skillId": PAY}))
        parked = asked["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        task_id, context_id = parked["id"], parked["contextId"]
        approve = {"approved": True}

        async def refused(expected: int, message: dict[str, Any], **params: Any) -> None:
            answer = await _rpc(http, message, **params)
            assert answer.get("error", {}).get("code") == expected, answer
            assert await _state(http, task_id) == "TASK_STATE_INPUT_REQUIRED"

        # The SDK's own check: the context id is not the task's.
        await refused(-32602, _message(approve, taskId=task_id, contextId=uuid.uuid4().hex))
        # A history length the SDK refuses.
        await refused(
            -32602, _message(approve, taskId=task_id), configuration={"historyLength": -1}
        )
        # The ACL now denies the caller: answered as an unknown task.
        acl.add_rule(ACLRule(callers=["@external"], targets=[PAY], effect="deny"))
        await refused(-32001, _message(approve, taskId=task_id))
        acl.remove_rule(["@external"], [PAY])
        # apcore's toggle disabled the skill.
        toggles.disable(PAY)
        await refused(-32601, _message(approve, taskId=task_id))
        toggles.enable(PAY)
        # An approval naming another skill (refused before the claim since items 2-4).
        await refused(-32602, _message(approve, taskId=task_id, metadata={"skillId": "x.y"}))

        done = await _rpc(http, _message(approve, taskId=task_id, contextId=context_id))
        task = done["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert task["artifacts"][0]["parts"][0]["data"] == {"paid": 5}


async def test_a_refused_streamed_follow_up_leaves_the_task_waiting() -> None:
    registry = Registry()
    registry.register(PAY, Pay())
    app, _ = A2AServerFactory(registry, environ={}, name="payer").create()
    async with (
        running_server(app) as url,
        httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http,
    ):
        parked = (await _rpc(http, _message({"amount": 7}, metadata={"skillId": PAY})))["result"]
        task_id = parked["task"]["id"]
        wrong = _message({"approved": True}, taskId=task_id, contextId=uuid.uuid4().hex)
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendStreamingMessage",
            "params": {"message": wrong},
        }
        answer = await http.post("/", json=body, headers=V1)
        assert '"code":-32602' in answer.text.replace(" ", ""), answer.text
        assert await _state(http, task_id) == "TASK_STATE_INPUT_REQUIRED"
        done = await _rpc(http, _message({"approved": True}, taskId=task_id))
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done


@pytest.mark.parametrize("cluster", [False, True], ids=["postgresql", "postgresql-cluster"])
async def test_a_follow_up_whose_client_hung_up_before_it_was_delivered_leaves_the_wait(
    cluster: bool,
) -> None:
    """A streamed approval claims the wait, then stalls on its push config's write (the
    config table held by a test connection) and its client hangs up: the message never
    reached the run. Before, its claim stayed, and every later message, the right answer
    included, got "Task is busy" (-32090) for good. Now the wait is given back with the
    request: the next approval continues the task, and the payment runs once.

    The stream's slot comes back the moment its hang-up is read, before the request is torn
    down; the wait comes back as it is torn down. In cluster mode that is a deletion of the
    claim row, held here (a lock on that row) so it cannot commit: an approval sent then is
    told the task is busy (-32090), as under load it once was when the test took the freed
    slot for the request's end. Once the row is free the approval continues the task."""
    import asyncpg

    paid: list[int] = []

    class _Counted(Pay):
        def execute(self, inputs: dict[str, Any], context: object) -> dict[str, Any]:
            paid.append(inputs["amount"])
            return super().execute(inputs, context)

    registry = Registry()
    registry.register(PAY, _Counted())
    async with pg_schema_url() as url:
        schema = url.rsplit("schema=", 1)[1]
        app, _ = A2AServerFactory(
            registry,
            environ={},
            name="payer",
            task_store=url,
            cluster=cluster,
            push_notifications=True,
            push_allow_insecure_urls=True,
        ).create()
        async with (
            running_server(app) as base,
            httpx.AsyncClient(base_url=base, timeout=30, verify=TLS) as http,
        ):
            asked = await _rpc(http, _message({"amount": 5}, metadata={"skillId": PAY}))
            task_id = asked["result"]["task"]["id"]
            locker = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
            rower = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
            try:
                held = locker.transaction()
                await held.start()
                table = f"{schema}.push_notification_configs"
                await locker.execute(f"LOCK TABLE {table}")
                approve = _message({"approved": True}, taskId=task_id)
                push = {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}
                params = {"message": approve, "configuration": push}
                body = json.dumps(
                    {"jsonrpc": "2.0", "id": 3, "method": "SendStreamingMessage", "params": params}
                ).encode()
                host, port = base.removeprefix("http://").split(":")
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(
                    b"POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                    + f"A2A-Version: 1.0\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                waiting = f"SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '{table}'::regclass"
                await _until(lambda: locker.fetchval(waiting), "the approval never met the lock")
                assert not reader.at_eof()  # nothing answered yet
                if cluster:  # the claim row, locked: its deletion waits
                    await rower.execute("BEGIN")
                    claims = f"SELECT 1 FROM {schema}.apcore_a2a_task_turns WHERE task_id = $1"
                    assert await rower.fetch(f"{claims} FOR UPDATE", task_id)
                writer.close()
                await writer.wait_closed()
                # Its slot is free once the hang-up was read (the request still ends).
                await _until(_done(app.state.a2a.streams), "the hang-up was never read")
                await held.rollback()
                if cluster:
                    blocked = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
                    row_lock = await rower.fetchval("SELECT pg_backend_pid()")
                    await _until(
                        lambda: locker.fetchval(blocked, row_lock), "the wait was never given back"
                    )
                    early = await _rpc(http, _message({"approved": True}, taskId=task_id))
                    assert early.get("error", {}).get("code") == -32090, early
                    await rower.execute("ROLLBACK")
            finally:
                await locker.close()
                await rower.close()
            assert await _state(http, task_id) == "TASK_STATE_INPUT_REQUIRED"
            done = await _until_not_busy(http, _message({"approved": True}, taskId=task_id))
            assert done.get("result", {}).get("task", {}).get("status", {}).get("state") == (
                "TASK_STATE_COMPLETED"
            ), done
    assert paid == [5]


async def _until_not_busy(http: httpx.AsyncClient, message: dict[str, Any]) -> dict[str, Any]:
    """The answer to *message*, sent again while it is refused as busy (-32090): the
    hung-up request may still be giving its wait back. Never busy for good (hang guard)."""
    deadline = time.monotonic() + 30
    while (answer := await _rpc(http, message)).get("error", {}).get("code") == -32090:
        assert time.monotonic() < deadline, f"the wait was never given back: {answer}"
        await asyncio.sleep(0.02)
    return answer


def _done(streams: Any) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return bool(streams.active == 0)

    return check


async def _until(condition: Callable[[], Awaitable[Any]], what: str) -> None:
    deadline = time.monotonic() + 30  # a hang guard
    while not await condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)
