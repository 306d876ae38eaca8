"""A push config's deliveries follow the config as it is stored now.

The sender queued each event with the URL and credentials of the config when the event
came: a config registered again under its id with another URL, token or credentials still
had its queued events (and its POST in flight) posted to the replaced webhook with the
replaced credentials, and that webhook's failure marked the new registration failed, so
its later events were dropped. A config deleted or replaced on another replica (its
protocol version alone: until the task's next event there), or gone with its task (evicted
from memory, deleted by retention), kept its queue draining to a webhook nobody had anymore.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests._support import TLS

from .._postgres import store_url
from ._agent import (
    GATES,
    add_message,
    push_agent,
    receiver,
    rpc,
    skill_message,
    statuses,
    two_replicas,
)
from ._hostile import hostile
from ._rows import record_rows

_gates = itertools.count(900)
#: retries every 0.2 s for 10 s: a queue that drains takes far longer than the tests wait
_RETRYING = {"push_retry_delays": (0.2,) * 50, "shutdown_timeout": 1.0}


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path, agents=2) as url:
        yield url


def _states(bodies: list[bytes]) -> list[str]:
    docs = [json.loads(b) for b in bodies]
    return [d["statusUpdate"]["status"]["state"] for d in docs if "statusUpdate" in d]


async def test_a_config_registered_again_elsewhere_cuts_off_the_old_webhook() -> None:
    async with (
        hostile("stall") as old,
        receiver() as rec,
        push_agent(push_timeout=30.0, push_retry_delays=(), shutdown_timeout=1.0) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        n = next(_gates)
        GATES[n] = gate = asyncio.Event()
        hook = {"id": "c", "url": old.url, "token": "old-token"}
        send = {
            "message": skill_message("demo.gate", n),
            "configuration": {"returnImmediately": True, "taskPushNotificationConfig": hook},
        }
        task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
        await old.wait_for(lambda: len(old.conns) == 1)  # a POST in flight to the old URL
        again = {"taskId": task_id, "id": "c", "url": rec.url("/new"), "token": "new-token"}
        assert "result" in await rpc(client, base, "CreateTaskPushNotificationConfig", again)
        # The POST to the replaced webhook is cut off (was: held for push_timeout).
        await old.wait_for(lambda: len(old.closed()) == 1, timeout=10)
        gate.set()
        await rec.wait_for(
            lambda: "TASK_STATE_COMPLETED" in _states([d.body for d in rec.accepted("/new")])
        )
        await asyncio.wait_for(sender.idle(), timeout=10)
        status = await statuses(client, base, task_id)
    assert len(old.conns) == 1  # nothing more to the old webhook
    assert {d.headers["x-a2a-notification-token"] for d in rec.log} == {"new-token"}
    assert status == {"c": ("active", None)}
    assert sender.held_bytes == 0


@pytest.mark.parametrize("change", ["deleted", "replaced", "version"])
async def test_a_config_changed_on_another_replica_ends_this_ones_deliveries(
    shared_store: str, change: str
) -> None:
    async with two_replicas(shared_store, **_RETRYING) as r:
        r.rec.always["/old"] = 500
        sender = r.a.state.a2a.extras["push"].sender
        hook = {"id": "c", "url": r.rec.url("/old")}
        send = {"message": skill_message("demo.chunks", 5), "configuration": {}}
        send["configuration"]["taskPushNotificationConfig"] = hook
        task_id = (await rpc(r.client, r.base_a, "SendMessage", send))["result"]["task"]["id"]
        await r.rec.wait_for(lambda: len(r.rec.attempts("/old")) >= 2)  # A retries its first
        config = {"taskId": task_id, "id": "c"}
        if change == "deleted":
            reply = await rpc(r.client, r.base_b, "DeleteTaskPushNotificationConfig", config)
        elif change == "version":  # the same URL, registered the 0.3 way
            again = {"taskId": task_id, "pushNotificationConfig": hook}
            reply = await rpc(r.client, r.base_b, "tasks/pushNotificationConfig/set", again, "0.3")
        else:
            config["url"] = r.rec.url("/new")
            reply = await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", config)
        assert "result" in reply, reply
        # A notices at its next attempt (was: 5 events x 51 attempts, 0.2 s apart).
        await asyncio.wait_for(sender.idle(), timeout=10)
        posted = len(r.rec.attempts("/old"))
        status = await statuses(r.client, r.base_b, task_id)
    assert posted < 51  # the first event's attempts were not all made
    assert sender.held_bytes == 0
    assert status == ({} if change == "deleted" else {"c": ("active", None)})


async def test_a_task_evicted_from_memory_ends_its_deliveries() -> None:
    async with (
        hostile("stall") as stall,
        push_agent(
            task_max_capacity=1, push_timeout=30.0, push_retry_delays=(), shutdown_timeout=1.0
        ) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        hook = {"id": "s", "url": stall.url}
        send = {"message": skill_message("demo.chunks", 10)}
        send["configuration"] = {"taskPushNotificationConfig": hook}
        task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
        await stall.wait_for(lambda: len(stall.conns) == 1)
        assert sender.pending > 1
        # A second task evicts the first, finished one from the full store.
        assert "result" in await rpc(client, base, "SendMessage", {"message": add_message()})
        await asyncio.wait_for(sender.idle(), timeout=10)  # was: push_timeout per event
        await stall.wait_for(lambda: len(stall.closed()) == 1)
        configs = app.state.a2a.extras["push"].config_store
        kept = await configs.get_info_for_dispatch(task_id)  # was: kept for good
    assert len(stall.conns) == 1
    assert sender.held_bytes == 0
    assert kept == []


async def test_a_task_deleted_by_retention_ends_its_deliveries(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with (
        receiver(always={"/h": 500}) as rec,
        push_agent(task_store=url, task_retention_seconds=1, **_RETRYING) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        send = {"message": skill_message("demo.chunks", 5)}
        send["configuration"] = {"taskPushNotificationConfig": {"id": "h", "url": rec.url("/h")}}
        task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
        # Once retention has deleted the task, its deliveries end at their next attempt.
        await asyncio.wait_for(sender.idle(), timeout=15)
        gone = await rpc(client, base, "GetTask", {"id": task_id})
    assert "error" in gone
    assert len(rec.attempts("/h")) < 51
    assert sender.held_bytes == 0


async def test_a_config_registered_again_unchanged_keeps_its_deliveries() -> None:
    async with (
        receiver(fail_first={"/x": 1}) as rec,
        push_agent(push_retry_delays=(0.5,), shutdown_timeout=1.0) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        sender = app.state.a2a.extras["push"].sender
        hook = {"id": "x", "url": rec.url("/x"), "token": "t"}
        send = {"message": skill_message("demo.chunks", 3)}
        send["configuration"] = {"taskPushNotificationConfig": hook}
        task_id = (await rpc(client, base, "SendMessage", send))["result"]["task"]["id"]
        await rec.wait_for(lambda: len(rec.attempts("/x")) == 1)  # its retry waits
        again = {"taskId": task_id, **hook}
        assert "result" in await rpc(client, base, "CreateTaskPushNotificationConfig", again)
        await asyncio.wait_for(sender.idle(), timeout=10)
    assert sender.dropped == 0
    assert _states([d.body for d in rec.accepted("/x")])[-1] == "TASK_STATE_COMPLETED"
    assert len(rec.accepted("/x")) == len(rec.attempts("/x")) - 1  # every event, once


async def test_the_replaced_webhooks_failure_does_not_fail_the_new_config(tmp_path: Path) -> None:
    # Replica A's POST is under way to the old webhook when replica B replaces the config;
    # that POST then fails (A gives up on it: no retries). It used to mark the config that
    # B had just stored failed, so every later event for it was dropped.
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    once = {"push_retry_delays": (), "push_timeout": 30.0, "shutdown_timeout": 1.0}
    async with hostile("stall") as old, two_replicas(url, **once) as r:
        sender = r.a.state.a2a.extras["push"].sender
        send = {"message": skill_message("demo.chunks", 2), "configuration": {}}
        send["configuration"]["taskPushNotificationConfig"] = {"id": "c", "url": old.url}
        task_id = (await rpc(r.client, r.base_a, "SendMessage", send))["result"]["task"]["id"]
        await old.wait_for(lambda: len(old.conns) == 1)
        config = {"taskId": task_id, "id": "c", "url": r.rec.url("/new")}
        assert "result" in await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", config)
        old.release()  # the old webhook hangs up: A's POST fails
        await asyncio.wait_for(sender.idle(), timeout=10)
        status = await statuses(r.client, r.base_b, task_id)
    assert len(old.conns) == 1  # A posted nothing more there
    assert status == {"c": ("active", None)}


async def test_retention_deletes_a_tasks_push_records_with_it(tmp_path: Path) -> None:
    # A 0.3 config (a version row) whose receiver refuses (a failure row): both rows
    # outlived the task that retention deleted, for good (one per config ever failed).
    # The rows are read while the task is parked (input-required): retention takes no
    # unfinished task, however slow the machine (was: read after it finished, racing a
    # 1 s retention).
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    async with (
        receiver(always={"/h": 410}) as rec,
        push_agent(task_store=url, task_retention_seconds=1, shutdown_timeout=1.0) as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "data", "data": {"n": 1}}],
            "metadata": {"skillId": "demo.transfer"},
        }
        hook = {"id": "h", "url": rec.url("/h")}
        send = {"message": message, "configuration": {"pushNotificationConfig": hook}}
        task = (await rpc(client, base, "message/send", send, version="0.3"))["result"]
        assert task["status"]["state"] == "input-required", task
        await rec.wait_for(lambda: rec.attempts("/h"))
        await app.state.a2a.extras["push"].sender.idle()
        assert await record_rows(url, task["id"]) == [1, 1]  # a failure, a version
        assert "result" in await rpc(client, base, "CancelTask", {"id": task["id"]})
        async with asyncio.timeout(60):  # a hang guard
            while "error" not in await rpc(client, base, "GetTask", {"id": task["id"]}):
                await asyncio.sleep(0.2)  # retention deletes the task
        left = await record_rows(url, task["id"])
    assert left == [0, 0]
