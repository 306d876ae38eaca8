"""``ListTasks`` on every store (memory, SQLite, PostgreSQL) while the caller works between
pages, through the API alone: filtered by ``status``, by ``contextId`` and ``status``, and
by nothing, over JSON-RPC and REST.

The caller's tasks wait for approval (``bank.transfer``: input-required) or are done
(``math.add``: completed), some in one context of its own. Between two pages it starts
another waiting task in that context (newest: after the page token's position, so not in
this walk, but counted), another caller starts one of its own (never listed, never
counted), and the caller cancels a waiting task not yet listed (it moves ahead of the
position and leaves the ``status`` filter's count). Every page must be the caller's
matching tasks after the previous page's last one, newest first (ties by id), and
``totalSize`` the number of them at that moment.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from google.protobuf.timestamp_pb2 import Timestamp

from .._support import TLS, cli_server
from ._a2a import EXTENSIONS, walk_pages

A = {"X-API-Key": "key-a", "A2A-Version": "1.0"}
B = {"X-API-Key": "key-b", "A2A-Version": "1.0"}
WAITING = "TASK_STATE_INPUT_REQUIRED"
PAGE = 4


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


class Tasks:
    """The caller's tasks as the answers described them: id -> (ns, context, state)."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[int, str, str]] = {}

    def note(self, task: dict[str, Any]) -> None:
        stamp = Timestamp()
        stamp.FromJsonString(task["status"]["timestamp"])
        self.known[task["id"]] = (stamp.ToNanoseconds(), task["contextId"], task["status"]["state"])

    def matching(self, filters: dict[str, str]) -> list[str]:
        found = [
            (ns, task_id)
            for task_id, (ns, context, state) in self.known.items()
            if filters.get("status", state) == state
            and filters.get("contextId", context) == context
        ]
        return [task_id for _ns, task_id in sorted(found, reverse=True)]


async def _send(
    http: httpx.AsyncClient, headers: dict[str, str], skill: str, context: str = ""
) -> dict[str, Any]:
    data = {"to": "acct-1", "amount": 5} if skill == "bank.transfer" else {"a": 1, "b": 2}
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                               "parts": [{"data": data}], "metadata": {"skillId": skill}}  # fmt: skip
    if context:
        message["contextId"] = context
    answer = (
        await http.post("/", json=_rpc("SendMessage", message=message), headers=headers)
    ).json()
    task = answer["result"]["task"]
    expected = WAITING if skill == "bank.transfer" else "TASK_STATE_COMPLETED"
    assert task["status"]["state"] == expected, answer
    return dict(task)


async def test_pages_follow_the_callers_work_on_every_store(store_url: str) -> None:
    args = ["--extensions-dir", EXTENSIONS, "--task-store", store_url, "--log-level",
            "warning", "--api-key", "key-a=a", "--api-key", "key-b=b"]  # fmt: skip
    with cli_server(args) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
            mine = Tasks()
            first = await _send(http, A, "bank.transfer")
            mine.note(first)
            shared = first["contextId"]
            for i in range(1, 24):
                skill = "bank.transfer" if i % 2 else "math.add"
                mine.note(await _send(http, A, skill, shared if i % 3 == 0 else ""))
                await _send(http, B, skill)

            walks = [({"status": WAITING}, False), ({"status": WAITING}, True),
                     ({"status": WAITING, "contextId": shared}, False), ({}, True)]  # fmt: skip

            async def between(later: list[str]) -> None:
                mine.note(await _send(http, A, "bank.transfer", shared))
                await _send(http, B, "bank.transfer")
                waiting = [i for i in later if mine.known[i][2] == WAITING]
                if waiting:
                    body = _rpc("CancelTask", id=waiting[-1])
                    answer = (await http.post("/", json=body, headers=A)).json()
                    assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"
                    mine.note(answer["result"])

            for filters, rest in walks:
                pages = await walk_pages(http, A, rest, filters, PAGE, mine.matching, between)
                assert pages > 1, filters
