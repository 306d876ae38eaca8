"""The shared hostile-input target and helpers to talk to it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from ._serve import Served

V1 = {"A2A-Version": "1.0"}
JSON = {"content-type": "application/json"}


@dataclass
class Hostile:
    served: Served
    http: httpx.Client
    #: ids of real tasks (completed, failed, canceled) for hostile requests to name
    task_ids: list[str]


def message(skill: str | None, data: Any = None, text: str | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if data is not None:
        parts.append({"data": data})
    if text is not None:
        parts.append({"text": text})
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    if skill:
        msg["metadata"] = {"skillId": skill}
    return msg


def rpc(
    http: httpx.Client, method: str, params: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return http.post("/", json=body, headers=headers or V1)


def seed_tasks(http: httpx.Client) -> list[str]:
    """A completed, a failed and a canceled task (no task is left waiting)."""
    done = rpc(http, "SendMessage", {"message": message("rel.add", {"a": 1, "b": 2})}).json()
    failed = rpc(http, "SendMessage", {"message": message("rel.leak", {})}).json()
    parked = rpc(
        http, "SendMessage", {"message": message("rel.transfer", {"to": "bob", "amount": 3})}
    ).json()
    ids = [r["result"]["task"]["id"] for r in (done, failed, parked)]
    rpc(http, "CancelTask", {"id": ids[2]})
    return ids


def assert_healthy(served: Served, http: httpx.Client) -> None:
    """The agent process lives, ``/health`` is 200 and a plain send still completes."""
    assert served.proc.poll() is None, f"agent died: {served.log_text()[-3000:]}"
    health = http.get("/health")
    assert health.status_code == 200, health.text
    reply = rpc(http, "SendMessage", {"message": message("rel.add", {"a": 40, "b": 2})}).json()
    task = reply["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"data": {"sum": 42}}]
