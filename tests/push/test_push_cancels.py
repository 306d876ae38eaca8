"""A cancel is pushed once to the task's configs, whichever replica takes it and whether
or not a module is running when it comes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a import A2AServerFactory

from .._postgres import pg_schema_url
from .._support import free_port, running_server
from ._agent import demo_registry, push_agent, receiver, rpc
from ._agent import skill_message as message
from .test_push_versions import _gated_task


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A task store URL two cluster replicas share."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        with pg_schema_url(agents=2) as url:
            yield url


def _states(bodies: list[bytes]) -> list[str]:
    return [
        json.loads(body)["statusUpdate"]["status"]["state"]
        for body in bodies
        if b"statusUpdate" in body
    ]


async def test_a_cancel_taken_by_another_replica_is_pushed_once(shared_store: str) -> None:
    def replica() -> Any:
        return A2AServerFactory(
            demo_registry(),
            environ={},
            port=free_port(),
            task_store=shared_store,
            cluster=True,
            push_notifications=True,
            push_allow_insecure_urls=True,
        ).create()[0]

    a, b = replica(), replica()
    async with (
        receiver() as rec,
        running_server(a) as base_a,
        running_server(b) as base_b,
        httpx.AsyncClient(timeout=10) as client,
    ):
        task_id, gate = await _gated_task(client, base_a)  # runs on replica A
        config = {"taskId": task_id, "id": "x", "url": rec.url("/x")}
        await rpc(client, base_b, "CreateTaskPushNotificationConfig", config)
        canceled = await rpc(client, base_b, "CancelTask", {"id": task_id})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await rec.wait_for(
            lambda: "TASK_STATE_CANCELED" in _states([d.body for d in rec.accepted("/x")])
        )
        gate.set()  # A's module ends; its result is not stored, nor pushed
        for app in (a, b):
            await app.state.a2a.extras["push"].sender.idle()
    assert _states([d.body for d in rec.accepted("/x")]).count("TASK_STATE_CANCELED") == 1


async def test_a_cancel_of_a_parked_task_is_pushed_once() -> None:
    async with (
        receiver() as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=10) as client,
    ):
        reply = await rpc(client, base, "SendMessage", {"message": message("demo.transfer", 3)})
        task = reply["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        config = {"taskId": task["id"], "id": "x", "url": rec.url("/x")}
        await rpc(client, base, "CreateTaskPushNotificationConfig", config)
        canceled = await rpc(client, base, "CancelTask", {"id": task["id"]})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await rec.wait_for(
            lambda: "TASK_STATE_CANCELED" in _states([d.body for d in rec.accepted("/x")])
        )
        await app.state.a2a.extras["push"].sender.idle()
    assert _states([d.body for d in rec.accepted("/x")]).count("TASK_STATE_CANCELED") == 1
