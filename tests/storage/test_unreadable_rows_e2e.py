"""A stored task whose row cannot be read as a task costs that task only, on every binding.

A row can hold JSON its ``protocol_version`` does not describe: an older release's row
(0.3 state names), a hand edit, a partial write. The SDK reads a row by its version
(protobuf's ``ParseDict`` for 1.0, the 0.3 models otherwise), and one such row failed the
whole ``ListTasks`` page (-32603) for every caller who could see it, and a start whose
recovery met it. Here the rows are damaged by SQL beside good rows of the same owner and
of another owner, on one process and in cluster mode: the agent starts, pages skip the
damaged rows (their tokens still advance past them), ``GetTask`` of one answers the typed
``TaskUnreadableError``, each is logged once at WARNING by id, and no read rewrites or
deletes a row. An application's own SDK ``DatabaseTaskStore`` is read the same way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import ClientCallContext
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.server.models import TaskModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import GetTaskRequest, ListTasksRequest
from apcore import Registry
from sqlalchemy import select, update

from apcore_a2a import A2AServerFactory
from apcore_a2a.storage._urls import create_engine, parse_store_url
from tests._sdk import make_client
from tests.bindings._grpc import failure, rich_status, stubs

from .._modules import Add
from .._support import TLS, free_port, running_server

KEYS = {"alice": "key-of-alice-0123456789", "bob": "key-of-bob-0123456789"}
#: content of the damaged rows, which no log line may show
SECRET = "s3cret-" + uuid.uuid4().hex


def _headers(owner: str, version: str = "1.0") -> dict[str, str]:
    return {"X-API-Key": KEYS[owner], "A2A-Version": version}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _send(task_id: str = "") -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"a": 1, "b": 2}}], "metadata": {"skillId": "demo.add"}}  # fmt: skip
    if task_id:
        message["taskId"] = task_id
    return _rpc("SendMessage", message=message)


#: How a row is damaged: (its protocol_version, its status from the stored one).
DAMAGES: dict[str, tuple[str | None, Any]] = {
    "a 1.0 row holding a 0.3 state": ("1.0", lambda s: {**s, "state": "completed"}),
    "a 0.3 row holding 1.0 JSON": ("0.3", lambda s: s),
    "a 1.0 row holding a 0.3 running state": ("1.0", lambda s: {**s, "state": "working"}),
    "a partial write: status not an object": ("1.0", lambda s: json.dumps(s)[:20]),
}


#: How the agent keeps its tasks: the store its URL builds (one process, or cluster mode),
#: or the application's own SDK ``DatabaseTaskStore`` on the same database.
MODES = ["single", "cluster", "application's store"]


@contextlib.asynccontextmanager
async def _agent(url: str, mode: str) -> AsyncIterator[tuple[httpx.AsyncClient, str, str]]:
    """A served agent on *url*: (its HTTP client, its base URL, its gRPC address)."""
    registry = Registry()
    registry.register("demo.add", Add())
    grpc_port = free_port()
    own = DatabaseTaskStore(create_engine(parse_store_url(url))) if mode == MODES[2] else None
    app, _ = A2AServerFactory(
        registry,
        environ={},
        task_store=own or url,
        grpc_port=grpc_port,
        api_keys=tuple(f"{key}={owner}" for owner, key in KEYS.items()),
        cluster=mode == "cluster",
    ).create()
    try:
        async with (
            running_server(app) as base,
            httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http,
        ):
            yield http, base, f"127.0.0.1:{grpc_port}"
    finally:
        if own is not None:
            await own.engine.dispose()


async def _rows(url: str) -> dict[str, tuple[Any, ...]]:
    """Every stored task row, whole, by id."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(TaskModel.__table__))).all()
    finally:
        await engine.dispose()
    return {row.id: tuple(row) for row in rows}


async def _damage(url: str, task_ids: list[str]) -> None:
    """Damage one row per kind of :data:`DAMAGES`, by an ``UPDATE``."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.begin() as conn:
            for task_id, (version, status_of) in zip(task_ids, DAMAGES.values(), strict=True):
                where = TaskModel.id == task_id
                status = (await conn.execute(select(TaskModel.status).where(where))).scalar_one()
                values = {"protocol_version": version, "status": status_of(status)}
                await conn.execute(
                    update(TaskModel).where(where).values(**values, task_metadata={"k": SECRET})
                )
    finally:
        await engine.dispose()


async def _pages_over_http(http: httpx.AsyncClient, owner: str, rest: bool) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    token = ""
    while True:
        params: dict[str, Any] = {"pageSize": 2, **({"pageToken": token} if token else {})}
        if rest:
            reply = await http.get("/tasks", params=params, headers=_headers(owner))
            assert reply.status_code == 200, reply.text
            page = reply.json()
        else:
            answer = (
                await http.post("/", json=_rpc("ListTasks", **params), headers=_headers(owner))
            ).json()
            assert "result" in answer, answer
            page = answer["result"]
        pages.append(page)
        token = page.get("nextPageToken", "")
        if not token:
            return pages


async def _pages_over_grpc(base: str, owner: str) -> list[dict[str, Any]]:
    client = await make_client(base, "GRPC", "1.0")
    context = ClientCallContext(service_parameters={"X-API-Key": KEYS[owner]})
    pages: list[dict[str, Any]] = []
    token = ""
    try:
        while True:
            page = await client.list_tasks(
                ListTasksRequest(page_size=2, page_token=token), context=context
            )
            pages.append(
                {"tasks": [{"id": t.id} for t in page.tasks], "totalSize": page.total_size}
            )
            token = page.next_page_token
            if not token:
                return pages
    finally:
        await client.close()


def _no_internals(text: str) -> None:
    assert "Traceback" not in text and SECRET not in text and "site-packages" not in text, text


@pytest.mark.parametrize("mode", MODES)
async def test_an_unreadable_row_costs_only_its_own_task(
    sql_url: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with _agent(sql_url, mode) as (http, _base, _grpc):
        for owner, count in (("alice", 8), ("bob", 3)):
            for _ in range(count):
                answer = (await http.post("/", json=_send(), headers=_headers(owner))).json()
                assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        listed = {}
        for owner in KEYS:
            body = _rpc("ListTasks", pageSize=50)
            answer = (await http.post("/", json=body, headers=_headers(owner))).json()
            listed[owner] = [task["id"] for task in answer["result"]["tasks"]]
    alice, bob = listed["alice"], listed["bob"]
    # In the list's order: a page's second row, a page's first, a page's last and the very
    # last row (pages of two).
    bad = [alice[1], alice[2], alice[5], alice[7]]
    good = [task_id for task_id in alice if task_id not in bad]
    await _damage(sql_url, bad)
    stored = await _rows(sql_url)

    caplog.set_level(logging.WARNING, logger="apcore_a2a")
    # The start's recovery reads the running ones ("working"): the agent starts all the same.
    async with _agent(sql_url, mode) as (http, base, address):
        for rest in (False, True):
            for owner, expected in (("alice", good), ("bob", bob)):
                pages = await _pages_over_http(http, owner, rest)
                ids = [task["id"] for page in pages for task in page["tasks"]]
                assert ids == expected, (owner, rest)
                assert {page["totalSize"] for page in pages} == {len(listed[owner])}
        for owner, expected in (("alice", good), ("bob", bob)):
            pages = await _pages_over_grpc(base, owner)
            assert [task["id"] for page in pages for task in page["tasks"]] == expected
            assert {page["totalSize"] for page in pages} == {len(listed[owner])}

        for task_id in bad:
            for version, body in (("1.0", _rpc("GetTask", id=task_id)),
                                  ("0.3", {**_rpc("tasks/get", id=task_id)}),
                                  ("1.0", _rpc("CancelTask", id=task_id)),
                                  ("1.0", _rpc("SubscribeToTask", id=task_id)),
                                  ("1.0", _send(task_id))):  # fmt: skip
                reply = await http.post("/", json=body, headers=_headers("alice", version))
                error = reply.json()["error"]
                assert error["code"] == -32095, (body["method"], reply.text)
                assert "cannot be read" in error["message"] and task_id in error["message"]
                _no_internals(reply.text)
            for path, version in ((f"/tasks/{task_id}", "1.0"), (f"/v1/tasks/{task_id}", "0.3")):
                reply = await http.get(path, headers=_headers("alice", version))
                assert reply.status_code == 500, reply.text
                assert "TASK_UNREADABLE" in reply.text and "cannot be read" in reply.text
                _no_internals(reply.text)
            async with stubs(address) as (v1, v03):
                metadata = (("x-api-key", KEYS["alice"]),)
                for call in (v1.GetTask(GetTaskRequest(id=task_id), metadata=metadata),
                             v03.GetTask(a2a_v0_3_pb2.GetTaskRequest(name=f"tasks/{task_id}"),
                                         metadata=metadata)):  # fmt: skip
                    status = rich_status(await failure(call))
                    assert status["code"] == grpc.StatusCode.DATA_LOSS, status
                    assert status["reason"] == "TASK_UNREADABLE", status
                    assert "cannot be read" in status["message"], status
                    _no_internals(status["message"])
            # Another caller learns nothing of it.
            reply = await http.post("/", json=_rpc("GetTask", id=task_id), headers=_headers("bob"))
            assert reply.json()["error"]["code"] == -32001, reply.text

    assert await _rows(sql_url) == stored  # nothing read was rewritten or deleted
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    for task_id in bad:
        about = [r for r in warned if task_id in r.getMessage()]
        assert len(about) == 1, [r.getMessage() for r in about]
        assert about[0].name == "apcore_a2a.upstream.unreadable_rows"
        assert about[0].exc_info is None
    assert not [r for r in warned if SECRET in r.getMessage()]
