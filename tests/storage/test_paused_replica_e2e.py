"""A replica paused past the replica timeout: its task is failed elsewhere, and its module
stops when it wakes.

Replica A runs ``probe.work`` (which checks its cancel token) and is frozen with SIGSTOP
(a long GC pause, a frozen VM). Replica B finds A dead and fails the task ("Interrupted
by server restart"). When A wakes, its run must not go on with a module whose task is
already final elsewhere: the result can never be stored, and a caller who saw the task
fail may have sent the work again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from .test_replicas_e2e import PROBES, _pair

V10 = {"A2A-Version": "1.0"}
#: generous bound on any one wait of this test (no timing is asserted)
WAIT = 90.0


async def _rpc(url: str, method: str, params: dict[str, object]) -> dict[str, object]:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = (await http.post(url + "/", json=body, headers=V10)).json()
    assert "result" in answer, answer
    return dict(answer["result"])


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_woken_replica_stops_the_module_of_a_task_failed_elsewhere(
    backend: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    # Short enough for a quick test, and lenient: a replica judges others only after a
    # steady run of its own beats, which a busy machine can break at shorter intervals.
    timing = ["--cluster-heartbeat-interval", "0.5", "--cluster-replica-timeout", "4"]
    with _pair(backend, tmp_path, *timing, extensions=PROBES) as ((a, proc_a), (b, _)):
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": {"journal": str(journal), "seconds": 60}}],
            "metadata": {"skillId": "probe.work"},
        }
        sent = await _rpc(
            a, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
        task_id = sent["task"]["id"]  # type: ignore[index]

        def said() -> list[str]:
            return journal.read_text().split()[::2] if journal.exists() else []

        async def started() -> bool:
            return "started" in said()

        async def failed_on_b() -> bool:
            task = await _rpc(b, "GetTask", {"id": task_id})
            return task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]

        async def module_ended() -> bool:
            return len(said()) > 1

        await _until(started, "the module never started")
        os.kill(proc_a.pid, signal.SIGSTOP)
        try:
            await _until(failed_on_b, "B never failed the paused replica's task")
        finally:
            os.kill(proc_a.pid, signal.SIGCONT)
        await _until(module_ended, f"the module never ended: {said()}")
        assert said() == ["started", "canceled"]
