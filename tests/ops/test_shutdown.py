"""Graceful shutdown of ``serve()`` on SIGTERM, with the tasks kept in SQLite.

Running tasks get ``shutdown_timeout`` seconds to finish; whatever still runs then is
canceled (stored as canceled, streamed as such) and the process exits 0. The tasks are
started with ``returnImmediately``: no connection holds the server open for them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
from a2a.server.context import ServerCallContext
from a2a.types import TaskState

from apcore_a2a.server.shutdown import SHUTDOWN_MESSAGE
from apcore_a2a.settings import Settings
from apcore_a2a.storage import open_stores

from ._agent import V1, message_params, send, served, wait_state
from ._proc import serve_process

TASKS = 20


async def _stored_states(url: str, task_ids: list[str]) -> list[str]:
    """The states in the SQLite file, read after the server exited (no recovery run)."""
    stores = open_stores(url, Settings())
    try:
        found = [await stores.get_task(task_id, ServerCallContext()) for task_id in task_ids]
    finally:
        await stores.aclose()
    assert all(task is not None for task in found)
    return [TaskState.Name(task.status.state) for task in found if task is not None]


async def _start_sleepers(http: httpx.AsyncClient, seconds: float) -> list[str]:
    tasks = await asyncio.gather(
        *(
            send(http, "ops.sleep", {"seconds": seconds}, return_immediately=True)
            for _ in range(TASKS)
        )
    )
    ids = [t["id"] for t in tasks]
    for task_id in ids:
        await wait_state(http, task_id, {"TASK_STATE_WORKING"})
    return ids


async def _terminate(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(proc.wait, 30)
    out = proc.stdout.read() if proc.stdout else ""
    return code, out


async def _refused(url: str) -> bool:
    async with asyncio.timeout(5):
        while True:
            try:
                async with httpx.AsyncClient(timeout=1) as fresh:
                    await fresh.get(url + "/health")
            except httpx.ConnectError:
                return True
            await asyncio.sleep(0.05)


async def test_sigterm_lets_running_tasks_finish_within_the_timeout(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(task_store=store, shutdown_timeout=5) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            ids = await _start_sleepers(http, 2.0)
            proc.send_signal(signal.SIGTERM)
            # new connections are refused while the running tasks finish
            assert await _refused(url)
            code = await asyncio.to_thread(proc.wait, 30)
            out = proc.stdout.read() if proc.stdout else ""
    assert code == 0, out
    assert "Traceback" not in out
    assert await _stored_states(store, ids) == ["TASK_STATE_COMPLETED"] * TASKS


async def test_sigterm_cancels_what_outlives_the_timeout(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(task_store=store, shutdown_timeout=1) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=20) as http:
            quick = await send(http, "ops.sleep", {"seconds": 0.3}, return_immediately=True)
            ids = await _start_sleepers(http, 30.0)
            stream_events: list[dict[str, Any]] = []
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendStreamingMessage",
                "params": message_params("ops.sleep", {"seconds": 30}),
            }
            blocking = asyncio.ensure_future(
                http.post(
                    "/",
                    json={**body, "method": "SendMessage"},
                    headers=V1,
                )
            )

            async def watch() -> None:
                async with http.stream("POST", "/", json=body, headers=V1) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            stream_events.append(json.loads(line[5:]))

            streaming = asyncio.ensure_future(watch())
            async with asyncio.timeout(10):
                while not stream_events:
                    await asyncio.sleep(0.02)
            code, out = await _terminate(proc)
            await asyncio.wait_for(streaming, 10)
            answered = (await asyncio.wait_for(blocking, 10)).json()
    assert code == 0, out
    assert "Traceback" not in out
    stream_id = stream_events[0]["result"]["task"]["id"]
    blocking_id = answered["result"]["task"]["id"]
    assert answered["result"]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    last = stream_events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_CANCELED"
    assert last["message"]["parts"][0]["text"] == SHUTDOWN_MESSAGE
    assert answered["result"]["task"]["status"]["message"]["parts"][0]["text"] == SHUTDOWN_MESSAGE
    states = await _stored_states(store, [*ids, stream_id, blocking_id, quick["id"]])
    assert states == ["TASK_STATE_CANCELED"] * (TASKS + 2) + ["TASK_STATE_COMPLETED"]
    assert f"canceling {TASKS + 2} task(s)" in out


async def _lifespan_drain(shutdown_timeout: float, seconds: float, **settings: Any) -> list[str]:
    """Tasks in an app served in-process (no serve(), no signal): the app's lifespan
    drains them when the server stops. Returns their stored states afterwards."""
    keys = settings.get("api_keys", ())
    auth = {"X-API-Key": keys[0]} if keys else {}
    async with served(shutdown_timeout=shutdown_timeout, **settings) as (http, app):
        tasks = [
            await send(
                http, "ops.sleep", {"seconds": seconds}, return_immediately=True, headers=auth
            )
            for _ in range(3)
        ]
        running = app.state.a2a.ops.tracker.running()
        assert {e.task_id for e in running} == {t["id"] for t in tasks}
        # the caller's own context: the store is owner-scoped
        owner = running[0].call_context
    store = app.state.a2a.stores
    found = [await store.get_task(t["id"], owner) for t in tasks]
    return [TaskState.Name(t.status.state) for t in found if t is not None]


async def test_app_lifespan_waits_for_running_tasks() -> None:
    assert await _lifespan_drain(5, 0.3) == ["TASK_STATE_COMPLETED"] * 3


async def test_app_lifespan_cancels_tasks_that_outlive_the_timeout_as_their_owner() -> None:
    states = await _lifespan_drain(0.2, 30, api_keys=("key-of-alice",))
    assert states == ["TASK_STATE_CANCELED"] * 3
