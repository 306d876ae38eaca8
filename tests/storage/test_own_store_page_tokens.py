"""A crafted ``ListTasks`` page token is invalid params on an application's own task store
too (docs/storage.md, *Your own task store*), on every binding, and the caller's tasks
stay listed as before.

The SDK's token decoder raises ``RecursionError`` on JSON nested deeper than the stack
has room for. The request handler's guard decoded the token a few frames above the
store, so a token nested just past what the store's frames left (about 950 levels here)
passed the guard and failed the SDK's ``list`` of the application's store: -32603 / HTTP
500 / ``INTERNAL``, an ERROR traceback. A cursor whose time no protobuf ``Timestamp``
holds failed a ``DatabaseTaskStore`` subclass's ``list`` (the SDK's) the same way
("Timestamp is not valid"). Now the token is judged by what it is, not by the stack that
reads it: nested past a small bound, or a time out of range, it is refused before any
store.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import a2a_pb2

from apcore_a2a.storage._urls import create_engine, parse_store_url
from tests.bindings._grpc import stubs
from tests.ops._agent import message_params, rpc, served

from .._support import free_port
from .test_own_store_hostile_ids import AppStore

REST = {"A2A-Version": "1.0"}
#: nesting depths around where the SDK's decoder runs out of stack in a store's ``list``
DEPTHS = range(850, 1001)
#: nanoseconds out of a Timestamp's range (years 1 to 9999) and just inside it
OUT_OF_RANGE = (10**30, -(10**30), 253_402_300_800 * 10**9, -62_135_596_801 * 10**9)


def _nested(depth: int) -> str:
    raw = b"[" * depth + b"]" * depth
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor(timestamp_ns: int) -> str:
    raw = json.dumps({"ts": timestamp_ns, "id": "x"}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def own_store(request: pytest.FixtureRequest) -> AsyncIterator[TaskStore]:
    """The SDK's memory store, or a ``DatabaseTaskStore`` subclass with its own ``list``
    (which the agent does not page: the SDK's own ``list`` reads the token)."""
    if request.param == "memory":
        yield InMemoryTaskStore()
        return
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    store = AppStore(create_engine(parse_store_url(url)))
    store.seen = []
    yield store
    await store.engine.dispose()


async def _refusals(http: httpx.AsyncClient, address: str, token: str) -> list[Any]:
    """What JSON-RPC, REST and gRPC answer a ``ListTasks`` with *token*, as
    ``(binding, code)`` where the answer is not invalid params."""
    wrong: list[Any] = []
    said = await rpc(http, "ListTasks", {"pageToken": token})
    if said.get("error", {}).get("code") != -32602:
        wrong.append(("jsonrpc", said))
    reply = await http.get("/tasks", params={"pageToken": token}, headers=REST)
    if reply.status_code != 400 or "Traceback" in reply.text:
        wrong.append(("rest", reply.status_code, reply.text[:200]))
    async with stubs(address) as (v1, _v03):
        try:
            await v1.ListTasks(a2a_pb2.ListTasksRequest(page_token=token))
            wrong.append(("grpc", "OK"))
        except grpc.aio.AioRpcError as failed:
            if failed.code() != grpc.StatusCode.INVALID_ARGUMENT:
                wrong.append(("grpc", failed.code(), failed.details()))
    return wrong


async def test_crafted_tokens_are_invalid_params_on_an_own_store(own_store: TaskStore) -> None:
    grpc_port = free_port()
    async with served(task_store=own_store, grpc_port=grpc_port) as (http, _app):
        ids = []
        for a in range(3):
            sent = await rpc(http, "SendMessage", message_params("ops.add", {"a": a, "b": 1}))
            ids.append(sent["result"]["task"]["id"])
        before = await rpc(http, "ListTasks", {})
        assert sorted(t["id"] for t in before["result"]["tasks"]) == sorted(ids), before

        address = f"127.0.0.1:{grpc_port}"
        wrong = {}
        for depth in DEPTHS:
            if found := await _refusals(http, address, _nested(depth)):
                wrong[f"nested {depth}"] = found
        for timestamp_ns in OUT_OF_RANGE:
            if found := await _refusals(http, address, _cursor(timestamp_ns)):
                wrong[f"time {timestamp_ns}"] = found
        assert not wrong, {name: found[:1] for name, found in list(wrong.items())[:3]}

        # the caller's tasks, paged one by one with the tokens the agent gave, as before
        token, paged = "", []
        while True:
            page = (await rpc(http, "ListTasks", {"pageSize": 1, "pageToken": token}))["result"]
            paged += [task["id"] for task in page["tasks"]]
            token = page.get("nextPageToken", "")
            if not token:
                break
        assert paged == [t["id"] for t in before["result"]["tasks"]]
