"""Push across two real agent processes on one PostgreSQL schema: a config registered on
replica B for a task that A runs and finishes.

The replica that runs the task reads its configs from the shared store at each event, so
A pushes the task's end to the config B stored, once (docs/push.md: each event is pushed
once, by the replica that runs the task), and B pushes nothing of A's run.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .._postgres import pg_schema_url
from .._support import EXAMPLES, TLS, cli_server
from ._agent import receiver, rpc


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[str, str]]:
    with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args += ["--cluster", "--push-notifications", "--push-allow-insecure-urls", "--metrics"]
        with cli_server(args) as (a, _pa), cli_server(args) as (b, _pb):
            yield a, b


async def _idle(client: httpx.AsyncClient, *replicas: str) -> None:
    deadline = time.monotonic() + 60  # a hang guard
    for replica in replicas:
        while (await client.get(f"{replica}/metrics")).json()["push_notifications_pending"]:
            assert time.monotonic() < deadline, f"{replica} still delivering"
            await asyncio.sleep(0.1)


def _states(bodies: list[dict[str, Any]]) -> list[str]:
    found = (body.get("statusUpdate") or body.get("task") or {} for body in bodies)
    return [item["status"]["state"] for item in found if "status" in item]


async def test_a_config_stored_on_b_gets_a_task_finished_on_a_once(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    async with receiver() as rec, httpx.AsyncClient(timeout=60, verify=TLS) as client:
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": {"to": "bob", "amount": 5}}],
            "metadata": {"skillId": "bank.transfer"},
        }
        parked = (await rpc(client, a, "SendMessage", {"message": message}))["result"]["task"]
        config = {"taskId": parked["id"], "id": "c", "url": rec.url("/b")}
        assert "result" in await rpc(client, b, "CreateTaskPushNotificationConfig", config)
        approve = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "taskId": parked["id"],
            "parts": [{"text": "approve"}],
        }
        done = (await rpc(client, a, "SendMessage", {"message": approve}))["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
        await _idle(client, a, b)
        await rec.wait_for(lambda: "TASK_STATE_COMPLETED" in _states(_bodies(rec)))
        await _idle(client, a, b)
        states = _states(_bodies(rec))
    assert states.count("TASK_STATE_COMPLETED") == 1, states
    assert states.count("TASK_STATE_WORKING") <= 1, states


def _bodies(rec: Any) -> list[dict[str, Any]]:
    return [d.event for d in rec.accepted("/b")]
