"""A follow-up whose ``working`` save was committed but whose answer the database
connection lost (PostgreSQL, two real agent processes; A reaches the database through a
TCP proxy that passes the COMMIT of the save on and drops its answer, cutting the
connection).

The caller of A got the store's outage (-32092) and a2a-sdk's run ended at that save: its
write of ``failed`` met the version the lost commit made and was given up. Before: the
task stayed stored ``working`` with no run anywhere: every later message was refused busy
(-32090), on A as on B, for as long as A lived, and A's run waited for a ``working`` save
it would never hear of until ``execution_timeout`` (A's ``active_tasks`` stayed 1). Now
A's run ends at once, and A writes the task ``failed`` once the database answers, saying
why.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from .test_killed_turn_claim_e2e import ENV, V1, _approve, _send
from .test_turn_lost_answer_e2e import _LosingProxy, lost_approval

pytest.importorskip("asyncpg")

#: A's figures readable, and a run that waits for a save outlives the test by far
_ENV = {
    **ENV,
    "A2A_METRICS": "true",
    "A2A_OPS_DETAILS_PUBLIC": "true",
    "A2A_EXECUTION_TIMEOUT": "300",
}


async def _get(http: httpx.AsyncClient, base: str, task_id: str) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    return (await http.post(base + "/", json=body, headers=V1)).json()["result"]


async def _until(check: Any, seconds: float) -> Any:
    """The first truthy answer of *check* (awaited every 0.1 s; *seconds*: a hang guard),
    else the last one."""
    deadline = time.monotonic() + seconds
    while not (found := await check()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return found


async def test_a_lost_working_save_answer_ends_the_task_and_its_run() -> None:
    async with lost_approval(_LosingProxy(b"TASK_STATE_WORKING"), _ENV) as (http, a, b, parked):

        async def idle() -> bool:
            figures = (await http.get(a + "/metrics")).json()
            return bool(figures["active_tasks"] == 0)

        # Before: 1 until execution_timeout (300 s), the run waiting for the save.
        assert await _until(idle, 15), "A's run still waits for its lost save"

        async def ended() -> Any:
            task = await _get(http, b, parked["id"])
            return task if task["status"]["state"] != "TASK_STATE_WORKING" else None

        # A is live: nothing else ends the task (was: working for as long as A ran).
        task = await _until(ended, 15)
        assert task is not None, "the task stayed working"
        assert task["status"]["state"] == "TASK_STATE_FAILED", task
        said = task["status"]["message"]["parts"][0]["text"]
        assert "could not be saved" in said, said
        busy = await _send(http, b, _approve(parked["id"]))
        assert busy["error"]["code"] == -32004, busy  # a finished task's refusal
