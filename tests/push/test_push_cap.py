"""The cap on push configs per task: typed refusal on every binding, held under
concurrency (one process and two replicas), and no fan-out past it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.types import TaskPushNotificationConfig

from .._support import TLS, free_port, running_server
from ..bindings._grpc import rich_status, stubs
from ._agent import (
    GATES,
    V1,
    add_message,
    push_agent,
    push_app,
    receiver,
    rpc,
    skill_message,
)
from ._rows import config_rows, damage_rows

HOOK = "http://127.0.0.1:9/hook"
QUOTA = "This task already has {n} push notification configs, the most allowed; delete one or replace one by registering its id again"


async def _task(client: httpx.AsyncClient, base: str) -> str:
    reply = await rpc(client, base, "SendMessage", {"message": add_message()})
    return str(reply["result"]["task"]["id"])


async def _create(client: httpx.AsyncClient, base: str, task_id: str, cid: str) -> dict[str, Any]:
    return await rpc(
        client,
        base,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": cid, "url": f"{HOOK}/{cid}"},
    )


async def test_a_config_over_the_cap_is_refused_with_the_typed_error_on_every_binding() -> None:
    grpc_port = free_port()
    async with (
        push_agent(push_max_configs_per_task=3, grpc_port=grpc_port) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        # A task waiting for approval: it takes a follow-up message (with a config) below.
        parked = await rpc(
            client, base, "SendMessage", {"message": skill_message("demo.transfer", 1)}
        )
        task_id = str(parked["result"]["task"]["id"])
        for cid in ("c1", "c2", "c3"):
            assert (await _create(client, base, task_id, cid))["result"]["taskId"] == task_id
        message = QUOTA.format(n=3)

        # JSON-RPC 1.0 and 0.3: -32091 with the reason.
        over = await _create(client, base, task_id, "c4")
        assert over["error"]["code"] == -32091
        assert over["error"]["message"] == message
        old = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"id": "c4", "url": HOOK}},
            version="0.3",
        )
        assert (old["error"]["code"], old["error"]["message"]) == (-32091, message)
        # A send that brings a config for an existing task is refused the same way.
        follow = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"data": {"approved": True}}],
                    "taskId": task_id,
                },
                "configuration": {"taskPushNotificationConfig": {"id": "c4", "url": HOOK}},
            },
        )
        assert follow["error"]["code"] == -32091

        # REST 1.0 and 0.3: HTTP 429, RESOURCE_EXHAUSTED, reason QUOTA_EXCEEDED.
        rest = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs",
            json={"id": "c4", "url": HOOK},
            headers=V1,
        )
        assert rest.status_code == 429
        error = rest.json()["error"]
        assert (error["status"], error["message"]) == ("RESOURCE_EXHAUSTED", message)
        assert error["details"][0]["reason"] == "QUOTA_EXCEEDED"
        rest03 = await client.post(
            f"{base}/v1/tasks/{task_id}/pushNotificationConfigs",
            json={"pushNotificationConfig": {"id": "c4", "url": HOOK}},
        )
        assert rest03.status_code == 429
        assert rest03.json()["error"]["details"][0]["reason"] == "QUOTA_EXCEEDED"

        # gRPC 1.0 and 0.3: RESOURCE_EXHAUSTED with ErrorInfo QUOTA_EXCEEDED.
        async with stubs(f"127.0.0.1:{grpc_port}") as (v1, v03):
            with pytest.raises(grpc.aio.AioRpcError) as new:
                await v1.CreateTaskPushNotificationConfig(
                    TaskPushNotificationConfig(task_id=task_id, id="c4", url=HOOK)
                )
            status = rich_status(new.value)
            assert status["code"] == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert (status["reason"], status["message"]) == ("QUOTA_EXCEEDED", message)
            with pytest.raises(grpc.aio.AioRpcError) as legacy:
                await v03.CreateTaskPushNotificationConfig(
                    pb2_v03.CreateTaskPushNotificationConfigRequest(
                        parent=f"tasks/{task_id}",
                        config_id="c4",
                        config=pb2_v03.TaskPushNotificationConfig(
                            name=f"tasks/{task_id}/pushNotificationConfigs/c4",
                            push_notification_config=pb2_v03.PushNotificationConfig(
                                id="c4", url=HOOK
                            ),
                        ),
                    )
                )
            assert legacy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        # Nothing over the cap was stored; replacing an existing id is still allowed, and
        # deleting one makes room again.
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert sorted(c["id"] for c in listed["result"]["configs"]) == ["c1", "c2", "c3"]
        replaced = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "c2", "url": HOOK + "/new"},
        )
        assert replaced["result"]["url"] == HOOK + "/new"
        await rpc(client, base, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"})
        assert (await _create(client, base, task_id, "c4"))["result"]["id"] == "c4"


async def test_fifty_concurrent_registrations_store_exactly_the_cap_in_memory() -> None:
    await _fifty_at_once({})


async def test_fifty_concurrent_registrations_store_exactly_the_cap_in_sql(sql_store: str) -> None:
    await _fifty_at_once({"task_store": sql_store})


async def _answered(client: httpx.AsyncClient, base: str, task_id: str, cid: str) -> dict[str, Any]:
    """A registration's reply, sent again while it is -32092 (the store too slow to count
    the task's configs in time: a busy machine's honest answer, retry shortly), as its
    client would: the cap holds whatever the machine's speed."""
    async with asyncio.timeout(120):  # a hang guard
        while (reply := await _create(client, base, task_id, cid)).get("error", {}).get(
            "code"
        ) == -32092:
            await asyncio.sleep(0.1)
    return reply


async def _fifty_at_once(overrides: dict[str, Any]) -> None:
    async with (
        push_agent(**overrides) as (base, _app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        task_id = await _task(client, base)
        replies = await asyncio.gather(
            *(_answered(client, base, task_id, f"c{i}") for i in range(50))
        )
        accepted = [r for r in replies if "result" in r]
        refused = [r for r in replies if "error" in r]
        assert len(accepted) == 10  # the default cap
        assert {r["error"]["code"] for r in refused} == {-32091}
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert sorted(c["id"] for c in listed["result"]["configs"]) == sorted(
            r["result"]["id"] for r in accepted
        )


async def test_a_damaged_config_counts_toward_the_cap(sql_store: str) -> None:
    # A row the agent cannot read is left out of lists, but it is a stored config all
    # the same: with the cap at 2 and one such row, one more config is accepted.
    async with (
        push_agent(task_store=sql_store) as (base, _app),
        httpx.AsyncClient(verify=TLS) as client,
    ):
        task_id = await _task(client, base)
        assert "result" in await _create(client, base, task_id, "damaged")
    await damage_rows(sql_store, task_id, {"damaged": ("9.9", b"{}")})

    async with (
        push_agent(task_store=sql_store, push_max_configs_per_task=2) as (base, _app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        assert (await _create(client, base, task_id, "c1"))["result"]["id"] == "c1"
        over = await _create(client, base, task_id, "c2")
        assert (over["error"]["code"], over["error"]["message"]) == (-32091, QUOTA.format(n=2))
        # Registering the damaged row's id again replaces it: no new row, so not refused.
        assert (await _create(client, base, task_id, "damaged"))["result"]["id"] == "damaged"
        await rpc(client, base, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c1"})
    await damage_rows(sql_store, task_id, {"damaged": ("9.9", b"{}")})
    assert len(await config_rows(sql_store)) == 1

    # Twenty at once against a cap of 3: the damaged row leaves room for two.
    async with (
        push_agent(task_store=sql_store, push_max_configs_per_task=3) as (base, _app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        replies = await asyncio.gather(
            *(_create(client, base, task_id, f"n{i}") for i in range(20))
        )
        accepted = sorted(r["result"]["id"] for r in replies if "result" in r)
        assert len(accepted) == 2
        assert {r["error"]["code"] for r in replies if "error" in r} == {-32091}
    assert sorted(row[1] for row in await config_rows(sql_store)) == sorted(["damaged", *accepted])


async def test_two_replicas_registering_at_once_never_exceed_the_cap(pg_store: str) -> None:
    sql_store = pg_store
    # two processes on one database are replicas
    apps = [
        push_app(task_store=sql_store, cluster=True, push_max_configs_per_task=5) for _ in range(2)
    ]
    async with (
        running_server(apps[0]) as base_a,
        running_server(apps[1]) as base_b,
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        task_id = await _task(client, base_a)
        replies = await asyncio.gather(
            *(_create(client, (base_a, base_b)[i % 2], task_id, f"c{i}") for i in range(40))
        )
        accepted = sorted(r["result"]["id"] for r in replies if "result" in r)
        assert {r["error"]["code"] for r in replies if "error" in r} == {-32091}
        listed = await rpc(client, base_b, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        stored = sorted(c["id"] for c in listed["result"]["configs"])
        # Racing replicas may both withdraw, never both keep: at most the cap, and exactly
        # the accepted ones.
        assert stored == accepted
        assert 1 <= len(stored) <= 5


async def test_300_registrations_on_one_task_fan_out_to_at_most_the_cap() -> None:
    GATES[300] = asyncio.Event()
    async with (
        receiver() as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        reply = await rpc(
            client,
            base,
            "SendMessage",
            {
                "message": skill_message("demo.gate", 300),
                "configuration": {"returnImmediately": True},
            },
        )
        task_id = reply["result"]["task"]["id"]
        replies = [
            await rpc(
                client,
                base,
                "CreateTaskPushNotificationConfig",
                {"taskId": task_id, "id": f"h{i}", "url": rec.url(f"/h{i}")},
            )
            for i in range(300)
        ]
        assert sum("result" in r for r in replies) == 10
        GATES[300].set()
        await rec.wait_for(lambda: sum(b"TASK_STATE_COMPLETED" in d.body for d in rec.log) == 10)
        await app.state.a2a.extras["push"].sender.idle()
        per_hook = {d.path for d in rec.log}
        assert len(per_hook) == 10
        # The same events reach each of the ten, and nobody else.
        counts = {path: len(rec.attempts(path)) for path in per_hook}
        assert len(set(counts.values())) == 1
        assert len(rec.log) == 10 * next(iter(counts.values())) <= 30


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"token": "a\r\nX-Injected: 1"},
            "Invalid push notification config: the token contains characters that cannot be "
            "sent in an HTTP header",
        ),
        (
            {"authentication": {"scheme": "Bearer", "credentials": "x\nEvil: 1"}},
            "Invalid push notification config: authentication.credentials contain characters "
            "that cannot be sent in an HTTP header",
        ),
        (
            {"authentication": {"scheme": "Bearer x", "credentials": "y"}},
            "Invalid push notification config: authentication.scheme must be a single word "
            "such as Bearer or Basic",
        ),
        # A line break at the end of the scheme (``$`` would match before it).
        (
            {"authentication": {"scheme": "Bearer\n", "credentials": "y"}},
            "Invalid push notification config: authentication.scheme must be a single word "
            "such as Bearer or Basic",
        ),
        # Not ASCII: no header can carry the character (the sender could not encode it).
        (
            {"token": "caf\u00e9"},
            "Invalid push notification config: the token contains characters that cannot be "
            "sent in an HTTP header",
        ),
        (
            {"authentication": {"scheme": "Bearer", "credentials": "\u00fcber"}},
            "Invalid push notification config: authentication.credentials contain characters "
            "that cannot be sent in an HTTP header",
        ),
        # A field value neither starts nor ends with white space (RFC 9110 5.5).
        (
            {"token": " padded"},
            "Invalid push notification config: the token contains characters that cannot be "
            "sent in an HTTP header",
        ),
        (
            {"authentication": {"scheme": "Bearer", "credentials": "abc\t"}},
            "Invalid push notification config: authentication.credentials contain characters "
            "that cannot be sent in an HTTP header",
        ),
    ],
)
async def test_values_that_cannot_travel_in_a_header_are_refused_at_registration(
    config: dict[str, Any], message: str
) -> None:
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        task_id = await _task(client, base)
        reply = await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": uuid.uuid4().hex, "url": HOOK, **config},
        )
        assert (reply["error"]["code"], reply["error"]["message"]) == (-32602, message)
        listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"].get("configs", []) == []
