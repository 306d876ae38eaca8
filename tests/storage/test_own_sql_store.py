"""An application's own a2a-sdk ``DatabaseTaskStore`` object as ``task_store`` (used as is,
docs/storage.md): its tasks are kept in its database and read back through the agent."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy.ext.asyncio import create_async_engine

from apcore_a2a.edge.keys import stored_key
from tests.ops._agent import message_params, rpc, served


async def test_an_apps_own_sql_store_keeps_the_agents_tasks(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'own.db'}"
    engine = create_async_engine(url)
    try:
        async with served(task_store=DatabaseTaskStore(engine)) as (http, _app):
            sent = await rpc(http, "SendMessage", message_params("ops.add", {"a": 1, "b": 2}))
            task = sent["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            got = await rpc(http, "GetTask", {"id": task["id"]})
            assert got["result"]["id"] == task["id"]
    finally:
        await engine.dispose()
    # In the application's database, in the SDK's own table.
    with sqlite3.connect(tmp_path / "own.db") as db:
        rows = db.execute("SELECT status FROM tasks WHERE id = ?", (task["id"],)).fetchall()
    assert len(rows) == 1 and "COMPLETED" in str(rows[0][0]), rows


@pytest.mark.parametrize("key", ["\ud800", "a\x00b", "o" * 300], ids=["surrogate", "nul", "long"])
async def test_an_owner_resolver_key_no_column_holds_is_kept_as_ours_are(
    tmp_path: Path, key: str
) -> None:
    """The application's ``owner_resolver`` returning a key the owner column cannot hold:
    every operation serves the caller, its tasks under :func:`stored_key` of it, as a
    caller of ours with such a key (was: messages -32602, every read -32603)."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'own.db'}")
    store = DatabaseTaskStore(engine, owner_resolver=lambda _context: key)
    settings = {"push_notifications": True, "push_allow_insecure_urls": True}
    try:
        async with served(task_store=store, **settings) as (http, _app):

            async def ok(method: str, params: dict[str, Any]) -> Any:
                answer = await rpc(http, method, params)
                assert "error" not in answer, (method, answer)
                return answer["result"]

            assert (await ok("ListTasks", {}))["tasks"] == []
            missing = await rpc(http, "GetTask", {"id": "nope"})
            assert missing["error"]["code"] == -32001, missing
            task = (await ok("SendMessage", message_params("ops.add", {"a": 1, "b": 2})))["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            task_id = task["id"]
            assert (await ok("GetTask", {"id": task_id}))["id"] == task_id
            assert [t["id"] for t in (await ok("ListTasks", {}))["tasks"]] == [task_id]
            rest = await http.get("/tasks", headers={"A2A-Version": "1.0"})
            assert [t["id"] for t in rest.json()["tasks"]] == [task_id], rest.text
            got_rest = await http.get(f"/tasks/{task_id}", headers={"A2A-Version": "1.0"})
            assert got_rest.status_code == 200, got_rest.text
            sleeping = message_params("ops.sleep", {"seconds": 30}, return_immediately=True)
            running = (await ok("SendMessage", sleeping))["task"]
            canceled = await ok("CancelTask", {"id": running["id"]})
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED", canceled
            subscribe = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask"}
            subscribed = await http.post(
                "/", json={**subscribe, "params": {"id": task_id}}, headers={"A2A-Version": "1.0"}
            )
            assert "-32603" not in subscribed.text and "-32004" in subscribed.text, subscribed.text
            config = {"taskId": task_id, "id": "cfg", "url": "http://127.0.0.1:9/hook"}
            await ok("CreateTaskPushNotificationConfig", config)
            got = await ok("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "cfg"})
            assert got["id"] == "cfg", got
            await ok("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "cfg"})
    finally:
        await engine.dispose()
    with sqlite3.connect(tmp_path / "own.db") as db:
        owners = {owner for (owner,) in db.execute("SELECT owner FROM tasks")}
    assert owners == {stored_key(key)}


async def test_a_resolver_key_spelled_as_a_hashed_one_reads_no_other_callers_tasks(
    sql_url: str,
) -> None:
    """The application's ``owner_resolver`` answering one caller a key no column holds
    (kept as ``sha256:<hex>`` of it) and another caller that very text: two owners, the
    second reads, lists and finds to cancel none of the first's tasks (was: one owner, the second
    caller read them all)."""
    from apcore_a2a.storage._urls import create_engine, parse_store_url

    long_key = "victim-" + "v" * 300
    keys = {"victim": long_key, "mimic": stored_key(long_key)}

    def owner(context: Any) -> str:
        return keys[context.state["headers"].get("x-who", "victim")]

    engine = create_engine(parse_store_url(sql_url))
    store = DatabaseTaskStore(engine, owner_resolver=owner)
    try:
        async with served(task_store=store) as (http, _app):

            async def call(who: str, method: str, params: dict[str, Any]) -> Any:
                body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                headers = {"A2A-Version": "1.0", "X-Who": who}
                return (await http.post("/", json=body, headers=headers)).json()

            sent = await call("victim", "SendMessage", message_params("ops.add", {"a": 1, "b": 2}))
            task_id = sent["result"]["task"]["id"]
            assert (await call("victim", "GetTask", {"id": task_id}))["result"]["id"] == task_id
            assert (await call("mimic", "GetTask", {"id": task_id}))["error"]["code"] == -32001
            assert (await call("mimic", "ListTasks", {}))["result"]["tasks"] == []
            refused = await call("mimic", "CancelTask", {"id": task_id})
            assert refused["error"]["code"] == -32001, refused
            listed = (await call("victim", "ListTasks", {}))["result"]["tasks"]
            assert [t["id"] for t in listed] == [task_id]
    finally:
        await engine.dispose()
