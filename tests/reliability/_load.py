"""JSON-RPC calls used by the load and fault tests (raw httpx: cheapest per request)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

import httpx

V1 = {"A2A-Version": "1.0"}
TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)


def message(
    skill: str | None, data: Any, *, task_id: str = "", message_id: str = ""
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": message_id or uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
    }
    if skill:
        msg["metadata"] = {"skillId": skill}
    if task_id:
        msg["taskId"] = task_id
    return msg


async def call(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post("/", json=body, headers=V1)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def send(
    http: httpx.AsyncClient, msg: dict[str, Any], *, return_immediately: bool = False
) -> dict[str, Any]:
    params: dict[str, Any] = {"message": msg}
    if return_immediately:
        params["configuration"] = {"returnImmediately": True}
    reply = await call(http, "SendMessage", params)
    assert "result" in reply, reply
    return reply["result"]["task"]  # type: ignore[no-any-return]


async def all_tasks(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Every task the agent lists, by id (ListTasks pages of 100, artifacts included)."""
    tasks: dict[str, dict[str, Any]] = {}
    token = ""
    while True:
        params: dict[str, Any] = {"pageSize": 100, "includeArtifacts": True, "historyLength": 1}
        if token:
            params["pageToken"] = token
        reply = await call(http, "ListTasks", params)
        page = reply["result"]
        for task in page.get("tasks", []):
            tasks[task["id"]] = task
        token = page.get("nextPageToken", "")
        if not token:
            return tasks


async def wait_all_terminal(
    http: httpx.AsyncClient, ids: Iterable[str], timeout: float = 60.0
) -> dict[str, dict[str, Any]]:
    wanted = set(ids)
    deadline = time.monotonic() + timeout
    while True:
        tasks = await all_tasks(http)
        waiting = [
            i for i in wanted if tasks.get(i, {}).get("status", {}).get("state") not in TERMINAL
        ]
        if not waiting:
            return tasks
        if time.monotonic() > deadline:
            states = {tasks.get(i, {}).get("status", {}).get("state") for i in waiting}
            raise AssertionError(f"{len(waiting)} tasks not terminal after {timeout}s: {states}")
        await asyncio.sleep(0.2)


def output(task: dict[str, Any]) -> Any:
    """The data of the first artifact part (numbers compare equal as int or float)."""
    artifacts = task.get("artifacts") or []
    return artifacts[0]["parts"][0].get("data") if artifacts else None


def sse_payloads(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [
        json.loads(line[5:].strip())
        for line in lines
        if line.startswith("data:") and line[5:].strip()
    ]
