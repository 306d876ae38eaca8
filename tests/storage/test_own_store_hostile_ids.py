"""An application's own task store (docs/storage.md, *Your own task store*) never gets an
id no store can hold: a task, context or push config id with a NUL (or a lone surrogate)
is refused at the request handler, before any store, on every binding and version, as
not found (a task id) or an empty page (a ``contextId``); a page token naming such a task
is invalid params. Before: a ``DatabaseTaskStore`` subclass overriding ``list`` on
PostgreSQL was handed the NUL (as a ``contextId`` or in a page token) and answered
-32603 / 500.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
)
from a2a.utils.errors import TaskNotFoundError
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor

from apcore_a2a.storage._urls import create_engine, parse_store_url
from tests._sdk import make_client
from tests.ops._agent import message_params, rpc, served

from .._support import free_port

NUL_IDS = ["a\x00b", "\x00"]
REST = {"A2A-Version": "1.0"}


class AppStore(DatabaseTaskStore):
    """An application's store with its own ``list`` (which the agent does not page)."""

    seen: list[str]

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        self.seen.append(params.context_id)
        return await super().list(params, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Any:
        self.seen.append(task_id)
        return await super().get(task_id, context)


@pytest.fixture
async def app_store(sql_url: str) -> AsyncIterator[AppStore]:
    store = AppStore(create_engine(parse_store_url(sql_url)))
    store.seen = []
    yield store
    await store.engine.dispose()


async def test_no_store_of_the_application_gets_a_nul(app_store: AppStore) -> None:
    grpc_port = free_port()
    async with served(task_store=app_store, grpc_port=grpc_port, push_notifications=True,
                      push_allow_insecure_urls=True) as (http, _app):  # fmt: skip
        sent = await rpc(http, "SendMessage", message_params("ops.add", {"a": 1, "b": 2}))
        task = sent["result"]["task"]
        for value in NUL_IDS:
            listed = await rpc(http, "ListTasks", {"contextId": value})
            assert listed["result"].get("tasks", []) == [], listed
            # a page token of the SDK's forms naming such a task: the cursor, the older id
            for token in (
                encode_list_tasks_cursor(ListTasksCursor(1, value)),
                base64.b64encode(value.encode()).decode(),
            ):
                said = await rpc(http, "ListTasks", {"pageToken": token})
                assert said.get("error", {}).get("code") == -32602, said
                answer = await http.get("/tasks", params={"pageToken": token}, headers=REST)
                assert answer.status_code == 400, answer.text
            for method, params in (
                ("GetTask", {"id": value}),
                ("CancelTask", {"id": value}),
                ("SubscribeToTask", {"id": value}),
                ("GetTaskPushNotificationConfig", {"taskId": value, "id": "c"}),
                ("ListTaskPushNotificationConfigs", {"taskId": value}),
                ("DeleteTaskPushNotificationConfig", {"taskId": value, "id": "c"}),
                ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": value}),
                ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": value}),
            ):
                said = await rpc(http, method, params)
                assert said.get("error", {}).get("code") == -32001, (method, params, said)
            for v03, params in (
                ("tasks/get", {"id": value}),
                ("tasks/cancel", {"id": value}),
                ("tasks/pushNotificationConfig/get", {"id": value}),
                ("tasks/pushNotificationConfig/list", {"id": value}),
            ):
                body = {"jsonrpc": "2.0", "id": 1, "method": v03, "params": params}
                answer = await http.post("/", content=json.dumps(body),
                                         headers={"content-type": "application/json"})  # fmt: skip
                said = answer.json()
                assert said.get("error", {}).get("code") == -32001, (v03, said)
            path = quote(value, safe="")
            for verb, where, version in (
                ("GET", f"/tasks/{path}", "1.0"),
                ("POST", f"/tasks/{path}:cancel", "1.0"),
                ("GET", f"/tasks/{path}/pushNotificationConfigs", "1.0"),
                ("GET", f"/tasks/{task['id']}/pushNotificationConfigs/{path}", "1.0"),
                ("GET", f"/v1/tasks/{path}", "0.3"),
                ("POST", f"/v1/tasks/{path}:cancel", "0.3"),
            ):
                headers = {"content-type": "application/json", "A2A-Version": version}
                answer = await http.request(verb, where, content=b"{}", headers=headers)
                assert answer.status_code == 404, (where, answer.status_code, answer.text)
            listed_rest = await http.get("/tasks", params={"contextId": value}, headers=REST)
            assert listed_rest.status_code == 200 and listed_rest.json()["tasks"] == [], listed_rest
        base = str(http.base_url).rstrip("/")
        for version in ("1.0", "0.3"):
            grpc = await make_client(base, "GRPC", version)
            try:
                for value in NUL_IDS:
                    with pytest.raises(TaskNotFoundError):
                        await grpc.get_task(GetTaskRequest(id=value))
                    if version == "1.0":
                        page = await grpc.list_tasks(ListTasksRequest(context_id=value))
                        assert list(page.tasks) == []
            finally:
                await grpc.close()
    assert not [v for v in app_store.seen if "\x00" in v], app_store.seen


class OtherStore(InMemoryTaskStore):
    """An application's store that is no SQL table (its own database, say): records the
    ids it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def get(self, task_id: str, context: ServerCallContext) -> Any:
        self.seen.append(task_id)
        return await super().get(task_id, context)

    async def save(self, task: Any, context: ServerCallContext) -> None:
        self.seen += [task.id, task.context_id]
        await super().save(task, context)


async def test_a_message_naming_such_an_id_is_refused_whatever_the_store() -> None:
    # A follow-up's taskId, or a new task's contextId, with a NUL: the SQL stores refused
    # it up front (-32602, the field named); any other store was handed it (its get, then
    # its save, after the module ran).
    store = OtherStore()
    async with served(task_store=store) as (http, _app):
        for field in ("taskId", "contextId"):
            for value in NUL_IDS:
                params = message_params("ops.add", {"a": 1, "b": 2})
                params["message"][field] = value
                said = await rpc(http, "SendMessage", params)
                assert said.get("error", {}).get("code") == -32602, (field, said)
                assert f"message.{field} contains a NUL" in said["error"]["message"], said
    assert not [v for v in store.seen if "\x00" in v], store.seen
