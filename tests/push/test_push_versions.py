"""Push configs per protocol version (issue 19): REST 0.3 exactly in the 0.3 shape, the
spec's 0.3 body and DELETE, deliveries shaped by the registering version (durably), and the
config's own credentials in ``Authorization`` (PUSH-DELIVER-001)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from a2a.compat.v0_3 import types as types_v03
from a2a.types import GetTaskPushNotificationConfigRequest, TaskPushNotificationConfig
from google.protobuf.json_format import Parse

from .._support import TLS, free_port, running_server
from ..bindings._grpc import stubs
from ..bindings._peers import fetch_card, make_client
from ._agent import GATES, V1, push_agent, push_app, push_receiver, receiver, rpc, two_replicas
from ._agent import skill_message as message

_gate_numbers = iter(range(1000, 2000))


async def _gated_task(client: httpx.AsyncClient, base: str) -> tuple[str, asyncio.Event]:
    """A task that stays working until the returned event is set."""
    n = next(_gate_numbers)
    GATES[n] = asyncio.Event()
    reply = await rpc(
        client,
        base,
        "SendMessage",
        {"message": message("demo.gate", n), "configuration": {"returnImmediately": True}},
    )
    return str(reply["result"]["task"]["id"]), GATES[n]


def _strict_v03_rest(doc: dict[str, Any]) -> pb2_v03.TaskPushNotificationConfig:
    # What the genuine a2a-sdk 0.3 REST client does with the answer: a strict protobuf
    # parse that fails on any member the 0.3 schema does not have.
    return Parse(json.dumps(doc), pb2_v03.TaskPushNotificationConfig())


def _v03_tasks(bodies: list[bytes]) -> list[types_v03.Task]:
    out = []
    for body in bodies:
        doc = json.loads(body)
        assert doc["kind"] == "task", doc
        out.append(types_v03.Task.model_validate(doc))
    return out


async def test_configs_registered_over_0_3_get_the_whole_task_and_1_0_the_events() -> None:
    grpc_port = free_port()
    async with (
        receiver() as rec,
        push_agent(grpc_port=grpc_port) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        task_id, gate = await _gated_task(client, base)
        name = f"tasks/{task_id}/pushNotificationConfigs"
        # JSON-RPC 0.3, REST 0.3 (the spec's body, and the SDK clients' request body) and
        # gRPC 0.3; then JSON-RPC 1.0, REST 1.0 and gRPC 1.0 (no A2A-Version metadata).
        j03 = await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"id": "j03", "url": rec.url("/j03")}},
            version="0.3",
        )
        assert j03["result"]["pushNotificationConfig"]["id"] == "j03"
        spec = await client.post(
            f"{base}/v1/tasks/{task_id}/pushNotificationConfigs",
            json={
                "name": f"{name}/r03",
                "pushNotificationConfig": {"url": rec.url("/r03"), "token": "t"},
            },
        )
        assert spec.status_code == 200, spec.text
        assert spec.json() == {
            "name": f"{name}/r03",
            "pushNotificationConfig": {"id": "r03", "url": rec.url("/r03"), "token": "t"},
        }
        _strict_v03_rest(spec.json())
        sdk_form = await client.post(
            f"{base}/v1/tasks/{task_id}/pushNotificationConfigs",
            json={
                "parent": f"tasks/{task_id}",
                "configId": "q03",
                "config": {"pushNotificationConfig": {"url": rec.url("/q03")}},
            },
        )
        assert sdk_form.json() == {
            "name": f"{name}/q03",
            "pushNotificationConfig": {"id": "q03", "url": rec.url("/q03")},
        }
        got = await client.get(f"{base}/v1/tasks/{task_id}/pushNotificationConfigs/r03")
        assert _strict_v03_rest(got.json()).push_notification_config.token == "t"
        async with stubs(f"127.0.0.1:{grpc_port}") as (v1, v03):
            await v03.CreateTaskPushNotificationConfig(
                pb2_v03.CreateTaskPushNotificationConfigRequest(
                    parent=f"tasks/{task_id}",
                    config_id="g03",
                    config=pb2_v03.TaskPushNotificationConfig(
                        push_notification_config=pb2_v03.PushNotificationConfig(
                            id="g03", url=rec.url("/g03")
                        )
                    ),
                )
            )
            await v1.CreateTaskPushNotificationConfig(
                TaskPushNotificationConfig(task_id=task_id, id="g10", url=rec.url("/g10"))
            )
        await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "id": "j10", "url": rec.url("/j10")},
        )
        rest10 = await client.post(
            f"{base}/tasks/{task_id}/pushNotificationConfigs",
            json={"id": "r10", "url": rec.url("/r10")},
            headers=V1,
        )
        assert rest10.status_code == 200

        gate.set()
        await rec.wait_for(
            lambda: len({d.path for d in rec.log if b"completed" in d.body.lower()}) == 7
        )
        await app.state.a2a.extras["push"].sender.idle()
        for path in ("/j03", "/r03", "/q03", "/g03"):
            tasks = _v03_tasks([d.body for d in rec.accepted(path)])
            assert {t.id for t in tasks} == {task_id}
            assert tasks[-1].status.state == types_v03.TaskState.completed
            # The whole task as just saved: the result artifact is in the last one.
            (artifact,) = tasks[-1].artifacts or []
            assert artifact.parts[0].root.data == {"i": _gate_of(tasks[-1])}  # type: ignore[union-attr]
        for path in ("/j10", "/r10", "/g10"):
            events = [json.loads(d.body) for d in rec.accepted(path)]
            assert all(
                len(e) == 1 and next(iter(e)) in ("statusUpdate", "artifactUpdate", "task")
                for e in events
            )
            assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # The 0.3 receiver with a token gets it; every delivery is signed the same way.
        assert {d.headers["x-a2a-notification-token"] for d in rec.accepted("/r03")} == {"t"}
        verifier = push_receiver.DeliveryVerifier(base, rec.url("/r03"), token="t")
        for d in rec.accepted("/r03"):
            assert (await verifier.verify(d.headers, d.body))["task_id"] == task_id


def _gate_of(task: types_v03.Task) -> int:
    """The ``n`` the gated task was started with (from its first history message)."""
    first = (task.history or [])[0]
    return int(first.parts[0].root.data["n"])  # type: ignore[union-attr]


async def test_rest_0_3_refuses_a_body_for_another_task_and_deletes_per_0_3() -> None:
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        task_id, gate = await _gated_task(client, base)
        configs = f"{base}/v1/tasks/{task_id}/pushNotificationConfigs"
        other = await client.post(
            configs,
            json={
                "name": "tasks/someone-else/pushNotificationConfigs/x",
                "pushNotificationConfig": {"url": "http://127.0.0.1:9/x"},
            },
        )
        assert other.status_code == 400
        assert other.json()["error"]["message"] == (
            f"The body names task 'someone-else' but the path names task '{task_id}'"
        )
        broken = await client.post(
            configs, content=b"[1, 2", headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400
        assert broken.json()["error"]["message"] == "Parse error: body is not valid JSON"
        made = await client.post(
            configs, json={"pushNotificationConfig": {"id": "d", "url": "http://127.0.0.1:9/d"}}
        )
        assert made.status_code == 200
        # A 1.0 caller on the 0.3 route is refused for its version, as the SDK does.
        wrong = await client.delete(f"{configs}/d", headers=V1)
        assert wrong.status_code == 400
        assert wrong.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
        deleted = await client.delete(f"{configs}/d")
        assert (deleted.status_code, deleted.json()) == (200, {})
        gone = await client.get(f"{configs}/d")
        assert gone.status_code == 404
        missing = await client.delete(f"{base}/v1/tasks/no-such-task/pushNotificationConfigs/d")
        assert missing.status_code == 404
        gate.set()


async def test_the_sdk_0_3_rest_client_creates_and_reads_configs() -> None:
    async with push_agent() as (base, _app), httpx.AsyncClient(timeout=10, verify=TLS) as client:
        task_id, gate = await _gated_task(client, base)
        sdk = make_client(await fetch_card(base), "HTTP+JSON", "0.3")
        created = await sdk.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="s1", url="http://127.0.0.1:9/s1")
        )
        assert (created.id, created.url) == ("s1", "http://127.0.0.1:9/s1")
        got = await sdk.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="s1")
        )
        assert got.url == "http://127.0.0.1:9/s1"
        gate.set()


async def test_config_credentials_travel_in_authorization_and_the_jwt_beside_them() -> None:
    async with (
        receiver() as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        task_id, gate = await _gated_task(client, base)
        await rpc(
            client,
            base,
            "CreateTaskPushNotificationConfig",
            {
                "taskId": task_id,
                "id": "new",
                "url": rec.url("/new"),
                "authentication": {"scheme": "Bearer", "credentials": "s3cret-1"},
            },
        )
        await rpc(
            client,
            base,
            "tasks/pushNotificationConfig/set",
            {
                "taskId": task_id,
                "pushNotificationConfig": {
                    "id": "old",
                    "url": rec.url("/old"),
                    "authentication": {"schemes": ["Basic"], "credentials": "dXNlcjpwdw=="},
                },
            },
            version="0.3",
        )
        gate.set()
        await rec.wait_for(
            lambda: len({d.path for d in rec.log if b"completed" in d.body.lower()}) == 2
        )
        await app.state.a2a.extras["push"].sender.idle()
        for path, expected in (("/new", "Bearer s3cret-1"), ("/old", "Basic dXNlcjpwdw==")):
            verifier = push_receiver.DeliveryVerifier(base, rec.url(path), authorization=expected)
            deliveries = rec.accepted(path)
            assert deliveries
            for d in deliveries:
                assert d.headers["authorization"] == expected
                assert (await verifier.verify(d.headers, d.body))["task_id"] == task_id
        wrong = push_receiver.DeliveryVerifier(base, rec.url("/new"), authorization="Bearer x")
        with pytest.raises(push_receiver.DeliveryRejected, match="authorization mismatch"):
            await wrong.verify(rec.accepted("/new")[0].headers, rec.accepted("/new")[0].body)


async def test_the_registering_version_survives_a_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"

    def app() -> Any:
        return push_app(task_store=store)

    async with receiver() as rec:
        first = app()
        async with (
            running_server(first) as base,
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
        ):
            reply = await rpc(client, base, "SendMessage", {"message": message("demo.transfer", 7)})
            task = reply["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            for cid, version in (("old", "0.3"), ("new", "1.0")):
                params: dict[str, Any] = (
                    {
                        "taskId": task["id"],
                        "pushNotificationConfig": {"id": cid, "url": rec.url("/" + cid)},
                    }
                    if version == "0.3"
                    else {"taskId": task["id"], "id": cid, "url": rec.url("/" + cid)}
                )
                method = (
                    "tasks/pushNotificationConfig/set"
                    if version == "0.3"
                    else "CreateTaskPushNotificationConfig"
                )
                assert "result" in await rpc(client, base, method, params, version=version)
        second = app()
        async with (
            running_server(second) as base,
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
        ):
            assert await second.state.a2a.extras["push"].statuses.versions.read(task["id"]) == {
                "old": "0.3"
            }
            # The approval resumes the task on the second process: its events are pushed.
            approve = message("demo.transfer", 7)
            approve["parts"] = [{"data": {"approved": True}, "mediaType": "application/json"}]
            approve["taskId"] = task["id"]
            done = await rpc(client, base, "SendMessage", {"message": approve})
            assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            await rec.wait_for(
                lambda: all(
                    any(b"completed" in d.body.lower() for d in rec.accepted(p))
                    for p in ("/old", "/new")
                )
            )
            await second.state.a2a.extras["push"].sender.idle()
        olds = _v03_tasks([d.body for d in rec.accepted("/old")])
        assert (olds[-1].id, olds[-1].status.state) == (task["id"], types_v03.TaskState.completed)
        news = [json.loads(d.body) for d in rec.accepted("/new")]
        assert news[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_0_3_config_registered_on_one_replica_is_delivered_as_0_3_by_the_other(
    pg_store: str,
) -> None:
    sql_store = pg_store

    async with two_replicas(sql_store) as r:
        task_id, gate = await _gated_task(r.client, r.base_a)  # runs on replica A
        made = await rpc(
            r.client,
            r.base_b,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"id": "x", "url": r.rec.url("/x")}},
            version="0.3",
        )
        assert made["result"]["pushNotificationConfig"]["id"] == "x"
        gate.set()
        await r.rec.wait_for(lambda: any(b'"completed"' in d.body for d in r.rec.accepted("/x")))
        await r.a.state.a2a.extras["push"].sender.idle()
        tasks = _v03_tasks([d.body for d in r.rec.accepted("/x")])
        assert tasks[-1].id == task_id
        assert r.a.state.a2a.extras["push"].sender.sent == len(tasks)


async def test_the_version_is_recorded_before_the_config_can_be_dispatched_to() -> None:
    # A sender on another replica reads the configs, then their versions. Were the version
    # written after the config (as it was), a sender in between posted a 1.0 body to a 0.3
    # receiver (seen as a flaky cross-replica test). At the moment the config becomes
    # visible, its version must already be there.
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import InMemoryPushNotificationConfigStore

    from apcore_a2a.edge.call import CallRecord, attach
    from apcore_a2a.errors import QuotaExceededError
    from apcore_a2a.push.configs import PushConfigStore
    from apcore_a2a.push.status import ConfigStatusBook

    statuses = ConfigStatusBook()
    seen: list[dict[str, str]] = []

    class Watching(InMemoryPushNotificationConfigStore):
        async def set_info(self, task_id: str, config: Any, context: Any) -> Any:
            stored = await super().set_info(task_id, config, context)
            seen.append(await statuses.versions.read(task_id))  # what a sender now reads
            return stored

    store = PushConfigStore(Watching(), statuses, max_per_task=1)
    context = ServerCallContext()
    attach(context, CallRecord("grpc", "0.3", "CreateTaskPushNotificationConfig", "ip:x"))
    config = TaskPushNotificationConfig(id="x", task_id="t", url="http://127.0.0.1:9/x")
    await store.set_info("t", config, context)
    assert seen == [{"x": "0.3"}]
    # A registration refused over the cap leaves no version behind.
    other = TaskPushNotificationConfig(id="y", task_id="t", url="http://127.0.0.1:9/y")
    with pytest.raises(QuotaExceededError):
        await store.set_info("t", other, context)
    assert await statuses.versions.read("t") == {"x": "0.3"}


async def test_another_callers_0_3_configs_never_change_the_shape_of_mine() -> None:
    # Without a SQL store the registering versions were kept for the task_max_capacity
    # tasks registered most recently, whoever's: bob's 0.3 configs on his quick tasks
    # (finished, evicted from the store, their records kept) pushed out the record of
    # alice's 0.3 config on her task still running, and her 0.3 receiver got 1.0 events.
    keys = ("key-alice-0123456789=alice", "key-bob-0123456789ab=bob")
    alice_key, bob_key = ({"X-API-Key": key.split("=")[0]} for key in keys)
    async with (
        receiver() as rec,
        push_agent(api_keys=keys, task_max_capacity=4) as (base, app),
        httpx.AsyncClient(timeout=10, headers=alice_key, verify=TLS) as alice,
        httpx.AsyncClient(timeout=10, headers=bob_key, verify=TLS) as bob,
    ):
        task_id, gate = await _gated_task(alice, base)
        config = {"id": "mine", "url": rec.url("/alice")}
        params = {"taskId": task_id, "pushNotificationConfig": config}
        await rpc(alice, base, "tasks/pushNotificationConfig/set", params, version="0.3")
        for _ in range(6):
            done = await rpc(bob, base, "SendMessage", {"message": message("demo.chunks", 1)})
            his = {"taskId": done["result"]["task"]["id"], "pushNotificationConfig": config}
            await rpc(bob, base, "tasks/pushNotificationConfig/set", his, version="0.3")
        gate.set()
        await rec.wait_for(
            lambda: any(b"completed" in d.body.lower() for d in rec.accepted("/alice"))
        )
        await app.state.a2a.extras["push"].sender.idle()
        tasks = _v03_tasks([d.body for d in rec.accepted("/alice")])
        assert tasks[-1].status.state == types_v03.TaskState.completed
