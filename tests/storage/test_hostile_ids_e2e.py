"""Ids a caller makes up cost only that caller: a task or context id with SQL quotes, LIKE
wildcards (``%``, ``_``), a NUL or 5,000 characters names no task but one of that id
(not found; an empty list), on every binding, on SQLite and PostgreSQL, one process and
cluster mode, and leaves another caller's tasks as they were. Before: on PostgreSQL
(whose text holds no NUL) a NUL in a read's id was an internal error (JSON-RPC -32603,
HTTP 500) on GetTask, CancelTask, SubscribeToTask and ListTasks by ``contextId``.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest
from a2a.utils.errors import TaskNotFoundError

from tests._sdk import make_client

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, free_port
from ._a2a import EXTENSIONS

ALICE = {"X-API-Key": "key-alice", "A2A-Version": "1.0"}
BOB = {"X-API-Key": "key-bob", "A2A-Version": "1.0"}
#: alice's contexts: what a LIKE of bob's values would match
CONTEXTS = ["ctx-%", "a_b", "o'k"]
HOSTILE = ["a\x00b", "\x00", "' OR '1'='1", "x'; DROP TABLE tasks; --", "%", "_", "ctx-%",
           "a_b", "o'k", "\\%", "x" * 5000]  # fmt: skip
NOT_FOUND = -32001


@contextlib.contextmanager
def _agent(backend: str, mode: str, tmp: Path) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        url = f"sqlite:///{tmp / 'tasks.db'}"
        if backend == "postgresql":
            url = stack.enter_context(pg_schema_url())
        args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--log-level", "warning",
                "--api-key", "key-alice=alice", "--api-key", "key-bob=bob", "--no-require-auth",
                "--grpc-port", str(free_port())]  # fmt: skip
        if mode == "cluster":
            args.append("--cluster")
        base, _ = stack.enter_context(cli_server(args))
        yield base


async def _rpc(http: httpx.AsyncClient, base: str, method: str, **params: Any) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    version = {"A2A-Version": "0.3"} if "/" in method else {}
    # json.dumps: a NUL travels as \u0000, as any JSON client sends it
    answer = await http.post(base + "/", content=json.dumps(body), headers=version)
    assert answer.status_code == 200, (method, answer.status_code, answer.text)
    return answer.text


def _message(context_id: str) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": "math.add"},
        "contextId": context_id,
    }


@pytest.mark.parametrize("mode", ["single", "cluster"])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_made_up_ids_find_nothing_and_touch_nothing(
    backend: str, mode: str, tmp_path: Path
) -> None:
    json_headers = {"content-type": "application/json"}
    with _agent(backend, mode, tmp_path) as base:
        async with (
            httpx.AsyncClient(headers={**ALICE, **json_headers}, timeout=60, verify=TLS) as alice,
            httpx.AsyncClient(headers={**BOB, **json_headers}, timeout=60, verify=TLS) as bob,
        ):
            tasks = {}
            for context_id in CONTEXTS:
                sent = json.loads(
                    await _rpc(alice, base, "SendMessage", message=_message(context_id))
                )
                tasks[sent["result"]["task"]["id"]] = sent["result"]["task"]

            for value in HOSTILE:
                for who in (alice, bob):
                    for method in ("GetTask", "CancelTask", "SubscribeToTask"):
                        said = await _rpc(who, base, method, id=value)
                        assert f'"code":{NOT_FOUND}' in said.replace(" ", ""), (method, said)
                    for v03 in ("tasks/get", "tasks/cancel"):
                        said = await _rpc(who, base, v03, id=value)
                        assert f'"code":{NOT_FOUND}' in said.replace(" ", ""), (v03, said)
                said = await _rpc(bob, base, "ListTasks", contextId=value)
                assert json.loads(said)["result"].get("tasks", []) == [], said

                path = quote(value, safe="")
                for method, where in (("GET", f"/tasks/{path}"), ("POST", f"/tasks/{path}:cancel")):
                    answer = await bob.request(method, base + where, content=b"{}")
                    assert answer.status_code == 404, (where, answer.text)
                listed = await bob.get(base + "/tasks", params={"contextId": value})
                assert listed.status_code == 200 and listed.json()["tasks"] == [], listed.text

            grpc = await make_client(base, "GRPC", "1.0")  # anonymous: a third caller
            try:
                for value in HOSTILE:
                    with pytest.raises(TaskNotFoundError):
                        await grpc.get_task(GetTaskRequest(id=value))
                    page = await grpc.list_tasks(ListTasksRequest(context_id=value))
                    assert list(page.tasks) == []
            finally:
                await grpc.close()

            # alice's tasks: as they were, and hers alone
            for task_id, task in tasks.items():
                got = json.loads(await _rpc(alice, base, "GetTask", id=task_id))
                assert got["result"] == task
            listed = json.loads(await _rpc(alice, base, "ListTasks"))
            assert {t["id"] for t in listed["result"]["tasks"]} == set(tasks)
