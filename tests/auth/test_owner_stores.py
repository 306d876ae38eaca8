"""Another caller's parked task, in every store and on every binding and version.

Alice's task waits for her approval (``input-required``, with a push config). Bob reads,
cancels, subscribes to it (also resuming with ``Last-Event-ID``), answers it, and reads,
replaces or deletes its push config, over JSON-RPC, REST (with a tenant too) and gRPC, 1.0
and 0.3: every answer is the one an unknown task id gets, word for word but the id, so he
cannot even learn that it exists. Then alice's own approval is taken (bob claimed no turn
of it) and her module runs once; her config is untouched. Memory, SQLite, PostgreSQL, and
cluster mode on both, with alice and bob on two replicas of one database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import a2a_pb2 as pb
from apcore import ModuleAnnotations, Registry
from google.protobuf.json_format import MessageToDict, ParseDict
from pydantic import BaseModel

from apcore_a2a import A2AServerFactory
from tests._postgres import pg_schema_url
from tests._support import TLS, free_port, threaded_server
from tests.bindings._grpc import stubs

KEYS = {"alice": "alice-" + secrets.token_hex(16), "bob": "bob-" + secrets.token_hex(16)}
HOOK = "http://127.0.0.1:9/alice"
RUNS: list[int] = []


class PayIn(BaseModel):
    amount: int


class PayOut(BaseModel):
    paid: int


class Pay:
    input_schema = PayIn
    output_schema = PayOut
    description = "Pay once approved"
    annotations = ModuleAnnotations(requires_approval=True)

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        RUNS.append(inputs["amount"])
        return {"paid": inputs["amount"]}


@dataclass
class Agent:
    url: str
    grpc_address: str


@contextlib.contextmanager
def _serve(store: str, cluster: bool) -> Iterator[Agent]:
    registry = Registry()
    registry.register("demo.pay", Pay())
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        registry,
        environ={},
        port=port,
        grpc_port=grpc_port,
        task_store=store,
        cluster=cluster,
        api_keys=tuple(f"{key}={who}" for who, key in KEYS.items()),
        push_notifications=True,
        push_allow_insecure_urls=True,
    ).create()
    with threaded_server(app, port=port) as url:
        yield Agent(url, f"127.0.0.1:{grpc_port}")


def store_of(
    kind: str, tmp_path_factory: pytest.TempPathFactory, stack: contextlib.ExitStack
) -> str:
    """The store URL of a fixture *kind* (``memory``, ``[cluster-]sqlite`` or
    ``[cluster-]postgresql``: a schema for two agents, dropped when *stack* closes)."""
    if kind == "memory":
        return "memory://"
    if kind.endswith("sqlite"):
        return f"sqlite:///{Path(tmp_path_factory.mktemp('store')) / 'tasks.db'}"
    return stack.enter_context(pg_schema_url(agents=2))


@pytest.fixture(
    scope="module",
    params=["memory", "sqlite", "postgresql", "cluster-sqlite", "cluster-postgresql"],
)
def agents(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Agent, Agent]]:
    """(alice's agent, bob's agent): two replicas of one database in cluster mode."""
    kind: str = request.param
    cluster = kind.startswith("cluster-")
    with contextlib.ExitStack() as stack:
        store = store_of(kind, tmp_path_factory, stack)
        alice = stack.enter_context(_serve(store, cluster))
        yield alice, stack.enter_context(_serve(store, cluster)) if cluster else alice


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _approval(version: str, task_id: str) -> dict[str, Any]:
    """``{"approved": true}`` on *task_id*, in the JSON of *version*."""
    data = {"approved": True}
    message: dict[str, Any] = {"role": "ROLE_USER", "parts": [{"data": data}]}
    if version == "0.3":
        message = {"kind": "message", "role": "user", "parts": [{"kind": "data", "data": data}]}
    return message | {"messageId": uuid.uuid4().hex, "taskId": task_id}


Probe = Callable[[str], Awaitable[Any]]


def http_probes(http: httpx.AsyncClient, base: str) -> dict[str, Probe]:
    """What bob tries over HTTP, each answering a comparable value for a task id."""
    bob = {"X-API-Key": KEYS["bob"]}
    v1 = {**bob, "A2A-Version": "1.0"}

    async def answer(response: httpx.Response) -> Any:
        return response.status_code, response.headers.get("content-type"), response.text

    async def rpc(version: str, method: str, params: dict[str, Any], **headers: str) -> Any:
        sent = {**(v1 if version == "1.0" else bob), **headers}
        return await answer(await http.post(base + "/", json=_rpc(method, params), headers=sent))

    async def rest(verb: str, path: str, body: Any = None, version: str = "1.0") -> Any:
        sent = v1 if version == "1.0" else bob
        return await answer(await http.request(verb, base + path, json=body, headers=sent))

    async def stream(verb: str, path: str, body: Any = None, **headers: str) -> Any:
        # A stream opened for someone else's task would hold: the timeout fails the test.
        async with asyncio.timeout(20):
            sent = {**v1, **headers}
            async with http.stream(verb, base + path, json=body, headers=sent) as response:
                await response.aread()
                return await answer(response)

    config = {"id": "cfg", "url": "http://127.0.0.1:9/bob"}
    lei = {"Last-Event-ID": "1"}
    return {
        "GetTask": lambda t: rpc("1.0", "GetTask", {"id": t}),
        "CancelTask": lambda t: rpc("1.0", "CancelTask", {"id": t}),
        "SendMessage": lambda t: rpc("1.0", "SendMessage", {"message": _approval("1.0", t)}),
        "SubscribeToTask": lambda t: stream("POST", "/", _rpc("SubscribeToTask", {"id": t})),
        "SubscribeToTask resumed": lambda t: stream(
            "POST", "/", _rpc("SubscribeToTask", {"id": t}), **lei
        ),
        "CreateTaskPushNotificationConfig": lambda t: rpc(
            "1.0", "CreateTaskPushNotificationConfig", {"taskId": t, **config}
        ),
        "GetTaskPushNotificationConfig": lambda t: rpc(
            "1.0", "GetTaskPushNotificationConfig", {"taskId": t, "id": "cfg"}
        ),
        "ListTaskPushNotificationConfigs": lambda t: rpc(
            "1.0", "ListTaskPushNotificationConfigs", {"taskId": t}
        ),
        "DeleteTaskPushNotificationConfig": lambda t: rpc(
            "1.0", "DeleteTaskPushNotificationConfig", {"taskId": t, "id": "cfg"}
        ),
        "tasks/get": lambda t: rpc("0.3", "tasks/get", {"id": t}),
        "tasks/cancel": lambda t: rpc("0.3", "tasks/cancel", {"id": t}),
        "message/send": lambda t: rpc("0.3", "message/send", {"message": _approval("0.3", t)}),
        "tasks/resubscribe resumed": lambda t: stream(
            "POST", "/", _rpc("tasks/resubscribe", {"id": t, "metadata": {"lastEventId": "1"}})
        ),
        "tasks/pushNotificationConfig/set": lambda t: rpc(
            "0.3",
            "tasks/pushNotificationConfig/set",
            {"taskId": t, "pushNotificationConfig": config},
        ),
        "tasks/pushNotificationConfig/get": lambda t: rpc(
            "0.3", "tasks/pushNotificationConfig/get", {"id": t}
        ),
        "tasks/pushNotificationConfig/list": lambda t: rpc(
            "0.3", "tasks/pushNotificationConfig/list", {"id": t}
        ),
        "tasks/pushNotificationConfig/delete": lambda t: rpc(
            "0.3",
            "tasks/pushNotificationConfig/delete",
            {"id": t, "pushNotificationConfigId": "cfg"},
        ),
        "GET /tasks/{id}": lambda t: rest("GET", f"/tasks/{t}"),
        "GET /{tenant}/tasks/{id}": lambda t: rest("GET", f"/tenant-a/tasks/{t}"),
        "POST /tasks/{id}:cancel": lambda t: rest("POST", f"/tasks/{t}:cancel", {}),
        "GET /tasks/{id}:subscribe resumed": lambda t: stream(
            "GET", f"/tasks/{t}:subscribe?lastEventId=1"
        ),
        "POST /message:send": lambda t: rest(
            "POST", "/message:send", {"message": _approval("1.0", t)}
        ),
        "POST /tasks/{id}/pushNotificationConfigs": lambda t: rest(
            "POST", f"/tasks/{t}/pushNotificationConfigs", {"taskId": t, **config}
        ),
        "DELETE /tasks/{id}/pushNotificationConfigs/cfg": lambda t: rest(
            "DELETE", f"/tasks/{t}/pushNotificationConfigs/cfg"
        ),
        "GET /v1/tasks/{id}": lambda t: rest("GET", f"/v1/tasks/{t}", version="0.3"),
        "POST /v1/tasks/{id}:cancel": lambda t: rest(
            "POST", f"/v1/tasks/{t}:cancel", {}, version="0.3"
        ),
        "GET /push/status/{id}": lambda t: rest("GET", f"/push/status/{t}"),
    }


def grpc_probes(v1: Any, v03: Any) -> dict[str, Probe]:
    """What bob tries over gRPC (1.0 and 0.3 services)."""
    bob = (("x-api-key", KEYS["bob"]),)

    async def unary(call: Awaitable[Any]) -> Any:
        try:
            return "answered", MessageToDict(await call)
        except grpc.aio.AioRpcError as refused:
            return refused.code().name, refused.details()

    async def stream(call: Any) -> Any:
        try:
            async with asyncio.timeout(20):
                return "answered", [MessageToDict(event) async for event in call]
        except grpc.aio.AioRpcError as refused:
            return refused.code().name, refused.details()

    def send(t: str) -> pb.SendMessageRequest:
        return ParseDict({"message": _approval("1.0", t)}, pb.SendMessageRequest())

    config = pb.TaskPushNotificationConfig(id="cfg", url="http://127.0.0.1:9/bob")
    name = "tasks/{}/pushNotificationConfigs/cfg"
    return {
        "grpc GetTask": lambda t: unary(v1.GetTask(pb.GetTaskRequest(id=t), metadata=bob)),
        "grpc CancelTask": lambda t: unary(v1.CancelTask(pb.CancelTaskRequest(id=t), metadata=bob)),
        "grpc SendMessage": lambda t: unary(v1.SendMessage(send(t), metadata=bob)),
        "grpc SubscribeToTask": lambda t: stream(
            v1.SubscribeToTask(pb.SubscribeToTaskRequest(id=t), metadata=bob)
        ),
        "grpc CreateTaskPushNotificationConfig": lambda t: unary(
            v1.CreateTaskPushNotificationConfig(
                pb.TaskPushNotificationConfig(task_id=t, id=config.id, url=config.url), metadata=bob
            )
        ),
        "grpc ListTaskPushNotificationConfigs": lambda t: unary(
            v1.ListTaskPushNotificationConfigs(
                pb.ListTaskPushNotificationConfigsRequest(task_id=t), metadata=bob
            )
        ),
        "grpc DeleteTaskPushNotificationConfig": lambda t: unary(
            v1.DeleteTaskPushNotificationConfig(
                pb.DeleteTaskPushNotificationConfigRequest(task_id=t, id="cfg"), metadata=bob
            )
        ),
        "grpc 0.3 GetTask": lambda t: unary(
            v03.GetTask(pb03.GetTaskRequest(name=f"tasks/{t}"), metadata=bob)
        ),
        "grpc 0.3 CancelTask": lambda t: unary(
            v03.CancelTask(pb03.CancelTaskRequest(name=f"tasks/{t}"), metadata=bob)
        ),
        "grpc 0.3 TaskSubscription": lambda t: stream(
            v03.TaskSubscription(pb03.TaskSubscriptionRequest(name=f"tasks/{t}"), metadata=bob)
        ),
        "grpc 0.3 GetTaskPushNotificationConfig": lambda t: unary(
            v03.GetTaskPushNotificationConfig(
                pb03.GetTaskPushNotificationConfigRequest(name=name.format(t)), metadata=bob
            )
        ),
    }


def _without(value: Any, task_id: str) -> str:
    """*value* as text, the task id and any other UUID (a trace id, a new id) blanked."""
    text = json.dumps(value, sort_keys=True).replace(task_id, "<task>")
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", text)


async def test_another_callers_parked_task_is_answered_as_an_unknown_one(
    agents: tuple[Agent, Agent],
) -> None:
    alices, bobs = agents
    alice = {"X-API-Key": KEYS["alice"], "A2A-Version": "1.0"}
    async with (
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
        stubs(bobs.grpc_address) as (v1, v03),
    ):

        async def as_alice(method: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = await http.post(alices.url + "/", json=_rpc(method, params), headers=alice)
            return dict(answer.json())

        pay = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": {"amount": 7}}],
        }
        parked = (await as_alice("SendMessage", {"message": pay}))["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
        task_id = parked["id"]
        mine = {"taskId": task_id, "id": "cfg", "url": HOOK}
        assert "result" in await as_alice("CreateTaskPushNotificationConfig", mine)

        probes = {**http_probes(http, bobs.url), **grpc_probes(v1, v03)}
        for label, probe in probes.items():
            unknown = str(uuid.uuid4())
            theirs, none = await probe(task_id), await probe(unknown)
            assert _without(theirs, task_id) == _without(none, unknown), label

        runs = len(RUNS)
        done = await as_alice("SendMessage", {"message": _approval("1.0", task_id)})
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
        assert len(RUNS) == runs + 1
        listed = await as_alice("ListTaskPushNotificationConfigs", {"taskId": task_id})
        assert listed["result"]["configs"] == [mine]
