"""The memory store's capacity is shared fairly: one caller's quick tasks evict its own
finished tasks, not another owner's before their TTL (issue 40, item 8).

A real server (``memory://``, capacity 20): caller A keeps two finished tasks; caller B
then runs 100 quick ones. A's tasks are still there (before: evicted by B's 19th); B's
newest are too, the store holding 20. The event log behind ``Last-Event-ID`` is shared
the same way: B's 1,000 quick tasks leave the log of A's parked approval.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from .._support import TLS, cli_server, find_key, sse_frames
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
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
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


def _stream_transfer() -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"to": "acct-9", "amount": 100}}],
        "metadata": {"skillId": "bank.transfer"},
    }
    return _rpc("SendStreamingMessage", message=message)


async def _events(
    http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str], at_most: int
) -> list[tuple[str | None, Any]]:
    """Up to *at_most* SSE events ``(id, payload)`` of one JSON-RPC stream (its error, if
    refused)."""
    events: list[tuple[str | None, Any]] = []
    async with http.stream("POST", "/", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        if not response.headers["content-type"].startswith("text/event-stream"):
            return [(None, json.loads(await response.aread()))]  # refused before streaming
        async with contextlib.aclosing(sse_frames(response)) as frames:
            async for event_id, payload in frames:
                events.append((event_id, payload))
                if "error" in payload or len(events) == at_most:
                    break
    return events


async def test_one_callers_quick_tasks_evict_its_own_stream_logs_not_anothers() -> None:
    """The event log behind Last-Event-ID keeps the recent events of 1,000 tasks
    (storage/stores.py EVENT_LOG_TASKS): B's 1,000 quick tasks give up B's own oldest
    logs, and A can still resume the stream of its parked approval (before: -32602,
    "no longer kept")."""
    args = ["--extensions-dir", EXTENSIONS, "--log-level", "warning",
            "--api-key", "key-a=a", "--api-key", "key-b=b"]  # fmt: skip
    with cli_server(args) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
            streamed = await _events(http, _stream_transfer(), A, at_most=10)
            states = find_key(streamed[-1][1], "state")
            assert states[-1] == "TASK_STATE_INPUT_REQUIRED", streamed
            ids = [event_id for event_id, _p in streamed]
            assert all(i is not None for i in ids) and len(ids) >= 2, ids
            task_id = find_key(streamed[0][1]["result"], "id")[0]
            theirs = []
            for _ in range(1000):
                answer = (await http.post("/", json=_send(), headers=B)).json()
                theirs.append(answer["result"]["task"]["id"])
            resume = _rpc("SubscribeToTask", id=task_id)
            replayed = await _events(
                http, resume, {**A, "Last-Event-ID": str(ids[0])}, at_most=len(ids) - 1
            )
            assert [event_id for event_id, _p in replayed] == ids[1:], replayed
            # The bound holds: B's oldest log made room.
            refused = await _events(
                http, _rpc("SubscribeToTask", id=theirs[0]), {**B, "Last-Event-ID": "1"}, 1
            )
            assert "no longer kept" in refused[0][1]["error"]["message"], refused
