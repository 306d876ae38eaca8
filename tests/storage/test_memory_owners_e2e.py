"""The memory store's capacity is shared fairly: one caller's quick tasks evict its own
finished tasks, not another owner's before their TTL (issue 40, item 8).

A real server (``memory://``, capacity 20): caller A keeps two finished tasks; caller B
then runs 100 quick ones. A's tasks are still there (before: evicted by B's 19th); B's
newest are too, the store holding 20.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from .._support import cli_server
from ._a2a import EXTENSIONS

A = {"X-API-Key": "key-a", "A2A-Version": "1.0"}
B = {"X-API-Key": "key-b", "A2A-Version": "1.0"}
CAPACITY = 20


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _send() -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"a": 1, "b": 2}}],
        "metadata": {"skillId": "math.add"},
    }
    return _rpc("SendMessage", message=message)


async def test_one_callers_quick_tasks_evict_its_own_not_anothers(tmp_path: Path) -> None:
    args = ["--extensions-dir", EXTENSIONS, "--log-level", "warning",
            "--api-key", "key-a=a", "--api-key", "key-b=b"]  # fmt: skip
    env = {"A2A_TASK_MAX_CAPACITY": str(CAPACITY), "A2A_TASK_TTL_SECONDS": "3600"}
    with cli_server(args, env=env) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            mine = [(await http.post("/", json=_send(), headers=A)).json() for _ in range(2)]
            kept = [answer["result"]["task"]["id"] for answer in mine]
            theirs = []
            for _ in range(100):
                answer = (await http.post("/", json=_send(), headers=B)).json()
                theirs.append(answer["result"]["task"]["id"])
            for task_id in kept:
                got = (await http.post("/", json=_rpc("GetTask", id=task_id), headers=A)).json()
                assert got.get("result", {}).get("id") == task_id, got
            listed = (await http.post("/", json=_rpc("ListTasks"), headers=B)).json()
            held = {t["id"] for t in listed["result"]["tasks"]}
            assert held == set(theirs[-(CAPACITY - 2) :])
