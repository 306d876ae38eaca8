"""A caller whose identity no database column holds is served on every store, binding and
operation, its tasks apart from everyone else's (a real server; SQLite and PostgreSQL).

A validly signed token's ``sub`` can hold a lone surrogate or a NUL (JSON spells both),
which PostgreSQL text refuses and no UTF-8 holds. Before, on a SQL store such a caller's
``ListTasks`` and ``GetTask`` were -32603 Internal error (the driver's refusal of the key,
its traceback logged) and its messages -32602; the memory store served it under the raw
key. Its tasks are now kept under ``sha256:<hex>`` of its owner key, as an owner too long
for the column is (``execution/identity.py``, :func:`stored_key`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict

from tests._support import TLS, free_port
from tests.bindings._grpc import failure, stubs

from .agent import message, serve_agent
from .keys import HMAC_SECRET
from .test_claim_edges import signed
from .test_owner_stores import store_of

#: each caller's ``sub`` as its token's JSON spells it
SUBS = {
    "surrogate": "\\ud800",
    "other surrogate": "\\udc00",
    "nul": "a\\u0000b",
    "long nul": "\\u0000" + "n" * 300,
    "alice": "alice",
}
HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture(
    scope="module",
    params=["memory", "sqlite", "postgresql", "cluster-sqlite", "cluster-postgresql"],
)
def agent(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, str]]:
    """(its URL, its gRPC address, the URL of a second replica in cluster mode, else its own)"""
    kind: str = request.param
    cluster = kind.startswith("cluster-")
    grpc_port = free_port()
    with contextlib.ExitStack() as stack:
        store = store_of(kind, tmp_path_factory, stack)
        settings: dict[str, Any] = {
            "auth_key": HMAC_SECRET,
            "task_store": store,
            "cluster": cluster,
            "push_notifications": True,
            "push_allow_insecure_urls": True,
        }
        base = stack.enter_context(serve_agent(grpc_port=grpc_port, **settings))
        other = stack.enter_context(serve_agent(**settings)) if cluster else base
        yield base, f"127.0.0.1:{grpc_port}", other


def _token(sub: str) -> str:
    return signed(f'{{"sub": "{sub}", "exp": {int(time.time()) + 600}}}')


def _message(skill: str = "demo.add", **ids: str) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2} if skill == "demo.add" else {}}],
        "metadata": {"skillId": skill},
        **ids,
    }


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _sse_tasks(body: str) -> set[str]:
    """The task ids a JSON-RPC stream's events name (none if it answered an error)."""
    ids = set()
    for line in body.splitlines():
        if line.startswith("data:"):
            event = json.loads(line[5:])
            assert "error" not in event, event
            result = event["result"]
            ids.add((result.get("task") or result.get("statusUpdate") or {}).get("taskId", ""))
            ids.add(result.get("task", {}).get("id", ""))
    return ids - {""}


async def _serve_caller(http: httpx.AsyncClient, sub: str) -> set[str]:
    """Every operation of a caller whose ``sub`` is *sub*, over JSON-RPC and REST; the ids of
    the tasks it made."""
    http.headers["Authorization"] = f"Bearer {_token(sub)}"

    async def rpc(method: str, params: dict[str, Any]) -> Any:
        answer = await http.post("/", json=_rpc(method, params))
        assert answer.status_code == 200, (method, answer.text)
        body = answer.json()
        assert "error" not in body, (method, body)  # was: -32603 (-32602 for messages)
        return body["result"]

    # Before any task: reads answer as for anyone (was: -32603 on a SQL store).
    assert (await rpc("ListTasks", {}))["tasks"] == []
    unknown = (await http.post("/", json=_rpc("GetTask", {"id": uuid.uuid4().hex}))).json()
    assert unknown["error"]["code"] == -32001, unknown
    assert (await http.get("/tasks")).status_code == 200
    task = (await rpc("SendMessage", {"message": _message()}))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    context = task["contextId"]
    follow = await rpc("SendMessage", {"message": _message(contextId=context)})
    rest = await http.post("/message:send", json={"message": _message()})
    assert rest.status_code == 200, rest.text
    async with http.stream(
        "POST", "/", json=_rpc("SendStreamingMessage", {"message": _message()})
    ) as s:
        assert s.status_code == 200
        streamed = _sse_tasks((await s.aread()).decode())
    waiting = await rpc(
        "SendMessage",
        {"message": _message("demo.wait"), "configuration": {"returnImmediately": True}},
    )
    canceled = await rpc("CancelTask", {"id": waiting["task"]["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED", canceled
    mine = {task["id"], follow["task"]["id"], rest.json()["task"]["id"], *streamed}
    mine.add(waiting["task"]["id"])
    assert len(mine) == 5, mine

    assert (await rpc("GetTask", {"id": task["id"]}))["id"] == task["id"]
    listed = await rpc("ListTasks", {})
    assert {t["id"] for t in listed["tasks"]} == mine
    in_context = await rpc("ListTasks", {"contextId": context})
    assert {t["id"] for t in in_context["tasks"]} == {task["id"], follow["task"]["id"]}
    page = await rpc("ListTasks", {"pageSize": 3, "includeArtifacts": True})
    rest_page = await http.get("/tasks", params={"pageSize": 3, "pageToken": page["nextPageToken"]})
    assert rest_page.status_code == 200, rest_page.text
    paged = [t["id"] for t in page["tasks"] + rest_page.json()["tasks"]]
    assert sorted(paged) == sorted(mine)
    got = await http.get(f"/tasks/{task['id']}")
    assert got.status_code == 200, got.text

    # A finished task: cancel and subscribe are typed refusals, as for any caller.
    cancel = (await http.post("/", json=_rpc("CancelTask", {"id": task["id"]}))).json()
    assert cancel["error"]["code"] == -32002, cancel
    assert (await http.post(f"/tasks/{task['id']}:cancel", json={})).status_code == 400
    async with http.stream("POST", "/", json=_rpc("SubscribeToTask", {"id": task["id"]})) as s:
        body = (await s.aread()).decode()
        assert "-32603" not in body and "-32004" in body, body

    config = {"taskId": task["id"], "id": "cfg", "url": HOOK}
    assert (await rpc("CreateTaskPushNotificationConfig", config))["url"] == HOOK
    got_cfg = await rpc("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"})
    assert got_cfg["url"] == HOOK
    listed_cfg = await rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert [c["id"] for c in listed_cfg["configs"]] == ["cfg"]
    await rpc("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"})
    rest_cfg = await http.post(f"/tasks/{task['id']}/pushNotificationConfigs", json=config)
    assert rest_cfg.status_code == 200, rest_cfg.text
    return mine


async def _drain(stream: Any) -> None:
    async for _event in stream:
        pass


async def _grpc_caller(v1: Any, sub: str, mine: set[str]) -> None:
    metadata = (("authorization", f"Bearer {_token(sub)}"),)
    sent = await v1.SendMessage(message("demo.add", {"a": 1, "b": 2}), metadata=metadata)
    assert sent.task.status.state == pb.TASK_STATE_COMPLETED
    mine.add(sent.task.id)
    got = await v1.GetTask(pb.GetTaskRequest(id=sent.task.id), metadata=metadata)
    assert got.id == sent.task.id
    listed = await v1.ListTasks(pb.ListTasksRequest(), metadata=metadata)
    assert {t.id for t in listed.tasks} == mine
    config = pb.TaskPushNotificationConfig(task_id=sent.task.id, id="cfg", url=HOOK)
    await v1.CreateTaskPushNotificationConfig(config, metadata=metadata)
    configs = await v1.ListTaskPushNotificationConfigs(
        pb.ListTaskPushNotificationConfigsRequest(task_id=sent.task.id), metadata=metadata
    )
    assert [c.id for c in configs.configs] == ["cfg"]
    named = pb.GetTaskPushNotificationConfigRequest(task_id=sent.task.id, id="cfg")
    assert (await v1.GetTaskPushNotificationConfig(named, metadata=metadata)).url == HOOK
    gone = pb.DeleteTaskPushNotificationConfigRequest(task_id=sent.task.id, id="cfg")
    await v1.DeleteTaskPushNotificationConfig(gone, metadata=metadata)
    # a finished task: a typed refusal, as for anyone
    subscribe = v1.SubscribeToTask(pb.SubscribeToTaskRequest(id=sent.task.id), metadata=metadata)
    finished = await failure(_drain(subscribe))
    assert finished.code() != grpc.StatusCode.INTERNAL, finished.details()
    assert finished.code() != grpc.StatusCode.NOT_FOUND, finished.details()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await v1.CancelTask(pb.CancelTaskRequest(id=sent.task.id), metadata=metadata)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, MessageToDict(got)


async def test_odd_callers_are_served_apart_on_every_store(
    agent: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    base, address, other_replica = agent
    caplog.set_level(logging.DEBUG)  # no line quotes the key, at any level
    tasks: dict[str, set[str]] = {}
    async with httpx.AsyncClient(
        base_url=base, headers={"A2A-Version": "1.0"}, timeout=30, verify=TLS
    ) as http:
        for name, sub in SUBS.items():
            tasks[name] = await _serve_caller(http, sub)
    async with stubs(address) as (v1, _v03):
        for name, sub in SUBS.items():
            await _grpc_caller(v1, sub, tasks[name])
    # Nobody sees another's tasks: each reads only its own (on the other replica in cluster
    # mode), and none of the others'; 0.3's JSON-RPC too.
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(
        base_url=other_replica, headers=headers, timeout=30, verify=TLS
    ) as http:
        for name, sub in SUBS.items():
            http.headers["Authorization"] = f"Bearer {_token(sub)}"
            listed = (await http.get("/tasks")).json()["tasks"]
            assert {t["id"] for t in listed} == tasks[name], name
            for other, theirs in tasks.items():
                if other != name:
                    answer = await http.post("/", json=_rpc("GetTask", {"id": min(theirs)}))
                    assert answer.json()["error"]["code"] == -32001, (name, other)
            old = {"A2A-Version": "0.3"}
            got = await http.post(
                "/", json=_rpc("tasks/get", {"id": min(tasks[name])}), headers=old
            )
            assert got.json()["result"]["id"] == min(tasks[name]), got.text
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert loud == []
    for record in caplog.records:
        text = record.getMessage() + (record.exc_text or "")
        assert "\ud800" not in text and "\udc00" not in text and "\x00" not in text, text
