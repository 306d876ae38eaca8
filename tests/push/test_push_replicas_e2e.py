"""Two real agent processes on one PostgreSQL: what replica A still posts for a config
that replica B changed.

A queued a task's events for a config whose receiver answers 500, and retries them. Then
B registers the config again under another protocol version (same URL and token), or B
gives up on the same config (its own delivery failed) and records it ``failed``. Each of
A's attempts reads the config, its version and its failure again (one read): A posts at
most the attempt already under way to the destination B replaced or declared failed.
It used to read the version only at the task's next event and no failure at all, so A
posted each queued event, with all its retries, in the old shape or to the failed URL.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from .._postgres import pg_schema_url
from .._support import EXAMPLES, TLS, cli_server
from ._agent import Delivery, Receiver, receiver, rpc, statuses

_PUSH = ["--push-notifications", "--push-allow-insecure-urls", "--metrics"]
#: A retries each event 15 times, 0.1 s apart: a queue A keeps draining for seconds
_A_RETRIES = [arg for _ in range(15) for arg in ("--push-retry-delay", "0.1")]
#: B gives up after one retry: its failure is recorded while A still retries
_B_RETRIES = ["--push-retry-delay", "0"]


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[str, str]]:
    """Replicas A and B (base URLs) of one agent on a fresh PostgreSQL schema."""
    with pg_schema_url(agents=2) as url:
        common = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        common += ["--cluster", *_PUSH]
        env = {"A2A_CLUSTER_POLL_INTERVAL": "0.1"}
        with (
            cli_server([*common, *_A_RETRIES], env=env) as (a, _pa),
            cli_server([*common, *_B_RETRIES], env=env) as (b, _pb),
        ):
            yield a, b


def _from(replica: str, deliveries: list[Delivery]) -> list[dict[str, Any]]:
    """The bodies of *deliveries* that *replica* signed (the JWT's ``iss``)."""

    def iss(d: Delivery) -> str:
        token = d.headers["x-a2a-signature"]
        return str(jwt.decode(token, options={"verify_signature": False})["iss"])

    return [json.loads(d.body) for d in deliveries if iss(d) == replica]


async def _idle(client: httpx.AsyncClient, replica: str, within: float = 120.0) -> None:
    """Wait until *replica* holds no push delivery (its ``/metrics``)."""
    deadline = time.monotonic() + within
    while (await client.get(f"{replica}/metrics")).json()["push_notifications_pending"]:
        assert time.monotonic() < deadline, f"{replica} still delivering after {within} s"
        await asyncio.sleep(0.2)


async def _retrying(rec: Receiver, path: str, a: str) -> None:
    """Wait until A has posted to *path* twice (its first event is being retried)."""
    await rec.wait_for(lambda: len(_from(a, rec.attempts(path))) >= 2)


async def test_a_version_changed_on_b_ends_as_old_bodies_on_a(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    async with (
        receiver(always={"/v": 500}) as rec,
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        hook = {"id": "c", "url": rec.url("/v"), "token": "t"}
        message = {
            "messageId": "m-v",
            "role": "ROLE_USER",
            "parts": [{"data": {"start": 5, "delay": 0}, "mediaType": "application/json"}],
            "metadata": {"skillId": "text.countdown"},
        }
        send = {"message": message, "configuration": {"taskPushNotificationConfig": hook}}
        task_id = (await rpc(client, a, "SendMessage", send))["result"]["task"]["id"]
        await _retrying(rec, "/v", a)
        # Registered again through B, the 0.3 way: the same URL and token, whole-task bodies.
        again = {"taskId": task_id, "pushNotificationConfig": hook}
        reply = await rpc(client, b, "tasks/pushNotificationConfig/set", again, version="0.3")
        assert "result" in reply, reply
        replaced = len(rec.log)
        await _idle(client, a)
        old = [body for body in _from(a, rec.log[replaced:]) if "kind" not in body]
        status = await statuses(client, b, task_id)
    # At most the attempt under way as B answered (was: every queued event, 16 times each).
    assert len(old) <= 1, len(old)
    assert status == {"c": ("active", None)}


async def test_a_config_failed_on_b_ends_its_deliveries_on_a(replicas: tuple[str, str]) -> None:
    a, b = replicas
    async with (
        receiver(always={"/f": 500}) as rec,
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        message = {
            "messageId": "m-f",
            "role": "ROLE_USER",
            "parts": [{"data": {"to": "bob", "amount": 5}, "mediaType": "application/json"}],
            "metadata": {"skillId": "bank.transfer"},
        }
        hook = {"id": "c", "url": rec.url("/f")}
        send = {"message": message, "configuration": {"taskPushNotificationConfig": hook}}
        task = (await rpc(client, a, "SendMessage", send))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await _retrying(rec, "/f", a)
        # B cancels the waiting task and pushes that: twice 500, so B gives the config up.
        assert "result" in await rpc(client, b, "CancelTask", {"id": task["id"]})
        deadline = time.monotonic() + 30
        while (await statuses(client, b, task["id"]))["c"][0] != "failed":
            assert time.monotonic() < deadline, "B never gave the config up"
            await asyncio.sleep(0.1)
        failed = len(rec.log)
        await _idle(client, a)
        after = _from(a, rec.log[failed:])
        status = await statuses(client, a, task["id"])
    # At most the attempt under way as A read the config (was: each queued event, 16 times).
    assert len(after) <= 1, len(after)
    assert status["c"][0] == "failed"
