"""A stored push config whose row cannot be read, on PostgreSQL, in cluster mode and across
a restart: it costs that config only, on every replica, in a run's deliveries and in the
failure the orphan recovery of a surviving replica pushes for a task whose replica was
killed (SIGKILL), and in the start-up recovery of an agent started again after it was
killed. The task's good config gets each event, the damaged one none; a process logs the
damaged row once (by task and config id), and nothing crashes."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._postgres import pg_schema_url
from .._support import TLS, cli_server, running_server
from ._agent import Receiver, push_app, receiver, rpc, two_replicas
from ._rows import damage_rows
from .test_push_cancels import KILLED_REPLICA_ENV, PROBES, probe_message
from .test_push_versions import _gated_task

#: What the damaged row holds: no JSON at all (the store has no encryption key).
BROKEN = {"d": ("1.0", b"{not a config")}
UNREADABLE = -32096  # PushConfigUnreadableError
_FAST_CLUSTER = {
    "cluster_poll_interval": 0.1,
    "cluster_heartbeat_interval": 0.2,
    "cluster_replica_timeout": 1.0,
}


def _states(rec: Receiver, path: str) -> list[str]:
    """The task states pushed to *path*, in arrival order."""
    bodies = [json.loads(d.body) for d in rec.accepted(path)]
    return [b["statusUpdate"]["status"]["state"] for b in bodies if "statusUpdate" in b]


def _row_logs(caplog: pytest.LogCaptureFixture, task_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and f"task {task_id}, push config d:" in r.getMessage()
    ]


async def _configs(client: httpx.AsyncClient, base: str, task_id: str, rec: Receiver) -> None:
    """Register the configs ``g`` and ``d`` of *task_id* on the replica at *base*."""
    for config_id in ("g", "d"):
        config = {"taskId": task_id, "id": config_id, "url": rec.url(f"/{config_id}")}
        made = await rpc(client, base, "CreateTaskPushNotificationConfig", config)
        assert "result" in made, made


async def _seen_from(client: httpx.AsyncClient, base: str, task_id: str) -> tuple[Any, ...]:
    """What a replica answers about the configs: the listed ids, Get of d, Get of g."""
    listed = await rpc(client, base, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    get_d = await rpc(client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "d"})
    get_g = await rpc(client, base, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "g"})
    ids = sorted(c["id"] for c in listed["result"]["configs"])
    return ids, get_d["error"]["code"], get_g["result"]["id"]


async def test_a_damaged_config_costs_only_itself_on_every_replica(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    with pg_schema_url(agents=2) as url:
        async with two_replicas(url) as r:
            task_id, gate = await _gated_task(r.client, r.base_a)  # runs on replica A
            await _configs(r.client, r.base_b, task_id, r.rec)
            await damage_rows(url, task_id, BROKEN)
            seen = [await _seen_from(r.client, base, task_id) for base in (r.base_a, r.base_b)]
            # The cap counts the damaged row: a config may replace it, not be added past it.
            again = {"taskId": task_id, "id": "d", "url": r.rec.url("/d2")}
            gate.set()
            await r.rec.wait_for(lambda: "TASK_STATE_COMPLETED" in _states(r.rec, "/g"))
            for app in (r.a, r.b):
                await app.state.a2a.extras["push"].sender.idle()
            replaced = await rpc(r.client, r.base_b, "CreateTaskPushNotificationConfig", again)
    assert seen == [(["g"], UNREADABLE, "g")] * 2
    assert _states(r.rec, "/g")[-1] == "TASK_STATE_COMPLETED"
    assert r.rec.attempts("/d") == []
    assert len(_row_logs(caplog, task_id)) == 2  # once per replica (both in this process)
    assert replaced["result"]["id"] == "d", replaced  # the owner can put it right


async def test_a_killed_replicas_task_is_failed_and_pushed_past_a_damaged_config(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # Replica A (a process) runs the task and is killed; replica B (here) fails the
    # orphan in its recovery loop and pushes that failure to the good config only.
    caplog.set_level(logging.WARNING)
    env = KILLED_REPLICA_ENV
    journal = tmp_path / "journal.txt"
    async with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", PROBES, "--task-store", url, "--cluster"]
        b = push_app(task_store=url, cluster=True, **_FAST_CLUSTER)
        async with (
            receiver() as rec,
            httpx.AsyncClient(timeout=10, verify=TLS) as client,
            running_server(b) as base_b,
        ):
            with cli_server(args, env=env) as (base_a, proc_a):
                task_id = await _damaged_task_killed(client, base_a, proc_a, url, journal, rec)
                await rec.wait_for(lambda: "TASK_STATE_FAILED" in _states(rec, "/g"))
                await b.state.a2a.extras["push"].sender.idle()
                stored = await rpc(client, base_b, "GetTask", {"id": task_id})
                seen = await _seen_from(client, base_b, task_id)
    assert stored["result"]["status"]["state"] == "TASK_STATE_FAILED"
    # Replica A may have pushed the task's `working` to the good config before it was
    # killed (a loaded machine starts the module after the configs are registered);
    # replica B's failure is the last and only other state the good config receives.
    *before, last = _states(rec, "/g")
    assert last == "TASK_STATE_FAILED" and set(before) <= {"TASK_STATE_WORKING"}, before
    assert rec.attempts("/d") == []
    assert seen == (["g"], UNREADABLE, "g")
    assert len(_row_logs(caplog, task_id)) == 1  # replica B's, once


def _journal(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _damaged_task_killed(
    client: httpx.AsyncClient, base: str, proc: Any, url: str, journal: Path, rec: Receiver
) -> str:
    """A task running its module on the agent at *base*, with a good config and a damaged
    one, whose process (*proc*) is then killed (SIGKILL) mid-run: the task's id."""
    work = {"journal": str(journal), "seconds": 300}
    send = {"message": probe_message("probe.work", work)}
    send["configuration"] = {"returnImmediately": True}
    task_id = str((await rpc(client, base, "SendMessage", send))["result"]["task"]["id"])
    await _configs(client, base, task_id, rec)
    await damage_rows(url, task_id, BROKEN)
    while "started" not in _journal(journal):
        await asyncio.sleep(0.05)
    proc.kill9()
    return task_id


async def test_a_restart_recovers_its_tasks_past_a_damaged_config(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # One agent (no cluster) is killed while its task runs; the agent started again on the
    # same database fails the task at start-up (stored, not pushed: push starts after)
    # and serves its configs: the good one listed, the damaged one answered unreadable.
    caplog.set_level(logging.WARNING)
    env = {"PUSH_NOTIFICATIONS": "true", "A2A_PUSH_ALLOW_INSECURE_URLS": "true"}
    journal = tmp_path / "journal.txt"
    with pg_schema_url(agents=1) as url:
        async with receiver() as rec, httpx.AsyncClient(timeout=10, verify=TLS) as client:
            with cli_server(["--extensions-dir", PROBES, "--task-store", url], env=env) as (
                base,
                proc,
            ):
                task_id = await _damaged_task_killed(client, base, proc, url, journal, rec)
            async with running_server(push_app(task_store=url)) as again:
                stored = await rpc(client, again, "GetTask", {"id": task_id})
                seen = await _seen_from(client, again, task_id)
    assert stored["result"]["status"]["state"] == "TASK_STATE_FAILED"
    assert seen == (["g"], UNREADABLE, "g")
    assert rec.attempts("/d") == []
    assert len(_row_logs(caplog, task_id)) == 1
