"""A cancel is pushed once to the task's configs, whichever replica takes it and whether
or not a module is running when it comes."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url, store_url
from .._support import TLS, cli_server
from ._agent import push_agent, receiver, rpc, two_replicas
from ._agent import skill_message as message
from .test_push_versions import _gated_task


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A task store URL cluster replicas share (three at most)."""
    with store_url(request.param, tmp_path, agents=3) as url:
        yield url


PROBES = str(Path(__file__).resolve().parents[1] / "storage" / "probes")
#: a replica process with push on, whose death the others notice within about a second
KILLED_REPLICA_ENV = {
    "PUSH_NOTIFICATIONS": "true",
    "A2A_PUSH_ALLOW_INSECURE_URLS": "true",
    "A2A_CLUSTER_POLL_INTERVAL": "0.1",
    "A2A_CLUSTER_HEARTBEAT_INTERVAL": "0.2",
    "A2A_CLUSTER_REPLICA_TIMEOUT": "1.0",
}


def probe_message(skill: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": inputs}],
        "metadata": {"skillId": skill},
    }


def _pushed(rec: Any) -> list[str]:
    """The states of the status updates pushed to ``/x``, in arrival order."""
    return [
        json.loads(d.body)["statusUpdate"]["status"]["state"]
        for d in rec.accepted("/x")
        if b"statusUpdate" in d.body
    ]


async def test_a_cancel_taken_by_another_replica_is_pushed_once(shared_store: str) -> None:
    async with two_replicas(shared_store) as r:
        task_id, gate = await _gated_task(r.client, r.base_a)  # runs on replica A
        config = {"taskId": task_id, "id": "x", "url": r.rec.url("/x")}
        await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", config)
        canceled = await rpc(r.client, r.base_b, "CancelTask", {"id": task_id})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await r.rec.wait_for(lambda: "TASK_STATE_CANCELED" in _pushed(r.rec))
        gate.set()  # A's module ends; its result is not stored, nor pushed
        for app in (r.a, r.b):
            await app.state.a2a.extras["push"].sender.idle()
    assert _pushed(r.rec).count("TASK_STATE_CANCELED") == 1


async def test_a_cancel_of_a_parked_task_is_pushed_once() -> None:
    async with (
        receiver() as rec,
        push_agent() as (base, app),
        httpx.AsyncClient(timeout=10, verify=TLS) as client,
    ):
        reply = await rpc(client, base, "SendMessage", {"message": message("demo.transfer", 3)})
        task = reply["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        config = {"taskId": task["id"], "id": "x", "url": rec.url("/x")}
        await rpc(client, base, "CreateTaskPushNotificationConfig", config)
        canceled = await rpc(client, base, "CancelTask", {"id": task["id"]})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await rec.wait_for(lambda: "TASK_STATE_CANCELED" in _pushed(rec))
        await app.state.a2a.extras["push"].sender.idle()
    assert _pushed(rec).count("TASK_STATE_CANCELED") == 1


async def test_a_task_failed_for_a_killed_replica_is_pushed_once(
    shared_store: str, tmp_path: Path
) -> None:
    """Replica A is killed (SIGKILL) while its task runs: the replica that fails the orphan
    ("Interrupted by server restart") pushes that status, once, whichever replica it is."""
    env = KILLED_REPLICA_ENV
    args = ["--extensions-dir", PROBES, "--task-store", shared_store, "--cluster"]
    journal = tmp_path / "journal.txt"
    async with receiver() as rec, httpx.AsyncClient(timeout=10, verify=TLS) as client:
        with (
            cli_server(args, env=env) as (base_a, proc_a),
            cli_server(args, env=env) as (base_b, _proc_b),
            cli_server(args, env=env) as (_base_c, _proc_c),
        ):
            work = {"journal": str(journal), "seconds": 300}
            send = {"message": probe_message("probe.work", work)}
            send["configuration"] = {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"id": "x", "url": rec.url("/x")},
            }
            reply = await rpc(client, base_a, "SendMessage", send)
            task_id = reply["result"]["task"]["id"]
            while not (journal.exists() and "started" in journal.read_text()):
                await asyncio.sleep(0.05)
            proc_a.kill9()
            await rec.wait_for(lambda: "TASK_STATE_FAILED" in _pushed(rec))
            stored = await rpc(client, base_b, "GetTask", {"id": task_id})
            assert stored["result"]["status"]["state"] == "TASK_STATE_FAILED"
        # B and C stopped (their queues drained): nothing more was pushed.
    assert _pushed(rec).count("TASK_STATE_FAILED") == 1


async def test_a_cancel_racing_the_result_keeps_the_stored_result() -> None:
    """A's module returns as B cancels: A's result artifact is stored (and pushed) between
    B's read of the task and B's write of the cancel (the task's version row held by a
    test connection, so that the two writes queue for it in that order). The cancel wins over the
    ``completed`` status, and the canceled task keeps the artifact. Before, the cancel
    wrote back the task as it had read it: the stored task lost the artifact its webhook
    and its event log had."""
    async with pg_schema_url(agents=2) as url:
        table = f"{url.rsplit('schema=', 1)[1]}.task_versions"
        # The first writer waiting for a row holds its tuple lock, the next waits for it.
        queued = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'tuple' "
            f"AND relation = '{table}'::regclass AND granted = $1"
        )
        async with two_replicas(url) as r:
            task_id, gate = await _gated_task(r.client, r.base_a)  # runs on replica A
            config = {"taskId": task_id, "id": "x", "url": r.rec.url("/x")}
            await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", config)
            while (await rpc(r.client, r.base_b, "GetTask", {"id": task_id}))["result"]["status"][
                "state"
            ] != "TASK_STATE_WORKING":
                await asyncio.sleep(0.02)
            locker = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
            try:
                held = locker.transaction()
                await held.start()
                row = f"SELECT 1 FROM {table} WHERE task_id = $1 FOR UPDATE"
                await locker.execute(row, task_id)
                gate.set()  # A's result queues for the row first
                while not await locker.fetchval(queued, True):
                    await asyncio.sleep(0.02)
                cancel = asyncio.ensure_future(
                    rpc(r.client, r.base_b, "CancelTask", {"id": task_id})
                )
                while not await locker.fetchval(queued, False) and not cancel.done():
                    await asyncio.sleep(0.02)
                await held.rollback()
            finally:
                await locker.close()
            canceled = await cancel
            assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled
            await r.rec.wait_for(lambda: "TASK_STATE_CANCELED" in _pushed(r.rec))
            for app in (r.a, r.b):
                await app.state.a2a.extras["push"].sender.idle()
            pushed = [json.loads(d.body) for d in r.rec.accepted("/x")]
            results = [p["artifactUpdate"]["artifact"] for p in pushed if "artifactUpdate" in p]
            assert len(results) == 1, pushed
            for base in (r.base_a, r.base_b):
                stored = (await rpc(r.client, base, "GetTask", {"id": task_id}))["result"]
                assert stored["status"]["state"] == "TASK_STATE_CANCELED"
                assert stored.get("artifacts") == results, stored
    assert _pushed(r.rec) == ["TASK_STATE_CANCELED"]
