"""Graceful shutdown of ``serve()`` on SIGTERM, with the tasks kept in SQLite.

Running tasks get ``shutdown_timeout`` seconds to finish; whatever still runs then is
canceled (stored as canceled, streamed as such) and the process exits 0. The tasks are
started with ``returnImmediately``: no connection holds the server open for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import TaskState

from apcore_a2a.ops.ctrl_c import ECHO
from apcore_a2a.ops.shutdown import SHUTDOWN_MESSAGE
from apcore_a2a.settings import Settings
from apcore_a2a.storage import open_stores

from .._support import TLS, ServerProcess
from ._agent import (
    V1,
    build_registry,
    read_stream,
    send,
    served,
    streaming_body,
    wait_state,
)
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
    """Start TASKS sleepers; return once each runs."""
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


async def _start_gated(http: httpx.AsyncClient, gate: Path, count: int, **kwargs: Any) -> list[str]:
    """Start *count* tasks that run until *gate* exists; return once each runs."""
    tasks = [
        await send(http, "ops.await_file", {"path": str(gate)}, return_immediately=True, **kwargs)
        for _ in range(count)
    ]
    ids = [t["id"] for t in tasks]
    for task_id in ids:
        await wait_state(http, task_id, {"TASK_STATE_WORKING"}, **kwargs)
    return ids


def _released_once_draining(app: Any, gate: Path) -> asyncio.Future[None]:
    """Touch *gate* (the gated runs complete) once *app*'s drain has recorded what it
    waits for."""
    tracker = app.state.a2a.ops.tracker

    async def release() -> None:
        while tracker.recorded is None:
            await asyncio.sleep(0.01)
        gate.touch()

    return asyncio.ensure_future(release())


async def _terminate(proc: ServerProcess) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(proc.wait, 30)
    return code, proc.output()


async def _refused(url: str) -> bool:
    async with asyncio.timeout(30):
        while True:
            try:
                async with httpx.AsyncClient(timeout=1, verify=TLS) as fresh:
                    # The card, not /health: a probe taken from the backlog as the listener
                    # closes is cancelled, and /health's store query with it (see the note
                    # of stop 36 on in-flight SQLite queries at shutdown).
                    await fresh.get(url + "/.well-known/agent-card.json")
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
                # refused, or taken from the backlog as the listener closed and dropped
                # unanswered (closed, or reset: a ReadError): either way no new request
                # is served
                return True
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def stopping(
    store: str, gate: Path, count: int, **settings: Any
) -> AsyncIterator[tuple[ServerProcess, list[str]]]:
    """An agent on *store* running *count* tasks until *gate* exists, sent SIGTERM; yields
    (process, task ids) once it refuses new connections, every task still running."""
    served = serve_process(task_store=store, **settings)
    # Started and stopped off the loop: it may run what the agent reaches (a proxy).
    url, proc = await asyncio.to_thread(served.__enter__)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            ids = await _start_gated(http, gate, count)
        proc.send_signal(signal.SIGTERM)
        assert await _refused(url)
        yield proc, ids
    finally:
        await asyncio.to_thread(served.__exit__, None, None, None)


async def test_sigterm_lets_running_tasks_finish_within_the_timeout(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    gate = tmp_path / "release"
    async with stopping(store, gate, TASKS, shutdown_timeout=30) as (proc, ids):
        gate.touch()  # only now can the tasks finish: inside the drain
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out
    assert f"waiting up to 30.0 s for {TASKS} running task(s)" in out, out
    assert await _stored_states(store, ids) == ["TASK_STATE_COMPLETED"] * TASKS


async def test_sigterm_cancels_what_outlives_the_timeout(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    # 3 s: what outlives it is canceled, and uvicorn then gives open streams as long to
    # receive that final event (1 s was too short for a busy machine)
    with serve_process(task_store=store, shutdown_timeout=3) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=20, verify=TLS) as http:
            quick = await send(http, "ops.sleep", {"seconds": 0.3}, return_immediately=True)
            ids = await _start_sleepers(http, 30.0)
            stream_events: list[dict[str, Any]] = []
            body = streaming_body("ops.sleep", {"seconds": 30})
            blocking = asyncio.ensure_future(
                http.post(
                    "/",
                    json={**body, "method": "SendMessage"},
                    headers=V1,
                )
            )
            streaming = asyncio.ensure_future(read_stream(http, body, stream_events))
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
    assert "is not stored" not in out  # the drain saw every final state saved


async def test_a_second_ctrl_c_ends_the_stop_while_the_lifespan_waits_for_the_drain(
    tmp_path: Path,
) -> None:
    """Before, a second Ctrl-C that came once the lifespan waited for the drain (uvicorn
    skips only a lifespan shutdown not yet begun) stopped nothing: the stop took the whole
    shutdown_timeout. The lifespan's shutdown now begins after the drain (the streams'
    last events first): the second Ctrl-C comes while the drain runs."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(task_store=store, shutdown_timeout=120) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            ids = await _start_gated(http, tmp_path / "never", 3)
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):  # a hang guard
            while "Shutting down: waiting up to" not in proc.output():
                await asyncio.sleep(0.05)
        await asyncio.sleep(ECHO)  # a person's next Ctrl-C, not the last one delivered again
        proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, 60)  # before: 120 s
        out = proc.output()
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
    assert code == 1, out  # tasks were abandoned (before: 0, as a graceful stop)
    said = "Second Ctrl-C: the stop waits no longer for 3 running task(s); the next start"
    assert said in out, out
    assert "Traceback" not in out
    # Left as they were: the next start fails them as interrupted.
    assert await _stored_states(store, ids) == ["TASK_STATE_WORKING"] * 3


async def test_a_second_ctrl_c_says_the_memory_store_keeps_nothing(tmp_path: Path) -> None:
    """Before, it said the next start would fail them as interrupted: nothing is kept."""
    with serve_process(shutdown_timeout=120) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            await _start_gated(http, tmp_path / "never", 2)
        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):  # a hang guard
            while "Shutting down: waiting up to" not in proc.output():
                await asyncio.sleep(0.05)
        await asyncio.sleep(ECHO)  # a person's next Ctrl-C, not the last one delivered again
        proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
    assert code == 1, out
    said = "2 running task(s); the memory task store ends with this process: nothing of them"
    assert said in out, out


async def _lifespan_drain(shutdown_timeout: float, release: bool, **settings: Any) -> list[str]:
    """Tasks in an app served in-process (no serve(), no signal): the app's lifespan
    drains them when the server stops. With *release* they are let finish once the drain
    has begun, otherwise they would run on. Returns their stored states afterwards."""
    keys = settings.get("api_keys", ())
    auth = {"X-API-Key": keys[0]} if keys else {}
    with tempfile.TemporaryDirectory() as folder:
        gate = Path(folder) / "release"
        registry = build_registry(gated=True)
        async with served(registry, shutdown_timeout=shutdown_timeout, **settings) as (http, app):
            ids = await _start_gated(http, gate, 3, headers=auth)
            tracker = app.state.a2a.ops.tracker
            running = tracker.running()
            assert {e.task_id for e in running} == set(ids)
            # the caller's own context: the store is owner-scoped
            owner = running[0].call_context
            releaser = _released_once_draining(app, gate) if release else None
        if releaser is not None:
            assert releaser.done()
    store = app.state.a2a.stores
    found = [await store.get_task(task_id, owner) for task_id in ids]
    return [TaskState.Name(t.status.state) for t in found if t is not None]


async def test_app_lifespan_waits_for_running_tasks() -> None:
    assert await _lifespan_drain(30, release=True) == ["TASK_STATE_COMPLETED"] * 3


async def test_app_lifespan_cancels_tasks_that_outlive_the_timeout_as_their_owner() -> None:
    states = await _lifespan_drain(0.2, release=False, api_keys=("key-of-alice",))
    assert states == ["TASK_STATE_CANCELED"] * 3


@pytest.mark.parametrize("first", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_second_sigint_to_the_workers_parent_alone_abandons_their_tasks(
    tmp_path: Path, first: signal.Signals
) -> None:
    """A second SIGINT sent to the parent of ``--workers`` alone (``docker run`` without a
    terminal hands Ctrl-C to PID 1 only), or a SIGINT after SIGTERM, ends the stop as it
    ends a single server's (uvicorn's rule). Before, the parent forwarded SIGTERM each
    time, which a worker already stopping ignores: the stop waited the whole
    shutdown_timeout; after SIGTERM it still did, until the parent counted two SIGINTs."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(task_store=store, cluster=True, workers=2, shutdown_timeout=60) as (
        url,
        proc,
    ):
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            await _start_gated(http, tmp_path / "never", 2)
        proc.send_signal(first)
        async with asyncio.timeout(30):  # a hang guard: both workers are stopping (one
            # with tasks drains them, uvicorn's own "Shutting down" follows the drain)
            while proc.output().count("Shutting down") < 2:
                await asyncio.sleep(0.05)
        await asyncio.sleep(ECHO)  # a person's next Ctrl-C, not the last one delivered again
        proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, 30)  # before: 60 s, then exit 0
        out = proc.output()
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
    assert code == 1, out  # a worker abandoned tasks
    assert "Second Ctrl-C: the stop waits no longer for" in out, out
