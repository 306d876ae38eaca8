"""A task quota lowered across two agent processes on one PostgreSQL schema, over HTTP.

A runs with ``max_unfinished_tasks_per_caller`` 5, B with 2 (a rolling change of the
setting): in between, A serves up to its 5 and B counts A's tasks, serving none while 2
or more are held. A restarts with 2, its caller's parked tasks still unfinished at slots 3
and 4. Before, racing sends at the new quota were served whenever a random slot below 2
was free: two more parked tasks, four against a quota of 2. Now no send is served until
fewer than 2 are held, and the peak of held task slots, sampled through the race, stays
at 2 (``tests/storage/test_lowered_quota.py`` holds the rule at the slot level).
"""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import EXAMPLES, TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, V1, _send
from .test_turn_takeover_e2e import _transfer

asyncpg = pytest.importorskip("asyncpg")

QUOTA_EXCEEDED = -32091


async def _parked(http: httpx.AsyncClient, base: str) -> str | None:
    """The id of a new parked task, or ``None`` when refused at the quota."""
    answer = await _send(http, base, _transfer())
    if "error" in answer:
        assert answer["error"]["code"] == QUOTA_EXCEEDED, answer
        return None
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer
    return str(task["id"])


async def _cancel(http: httpx.AsyncClient, base: str, task_id: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task_id}}
    answer = (await http.post(base + "/", json=body, headers=V1)).json()
    assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED", answer


async def _race(http: httpx.AsyncClient, db: Any, table: str, *bases: str) -> tuple[int, int]:
    """(sends served, peak of held task slots) of six sends per agent at once."""
    held = f"SELECT count(*) FROM {table} WHERE scope = 'task'"
    sends = [_parked(http, base) for _ in range(6) for base in bases]
    racing = asyncio.ensure_future(asyncio.gather(*sends))
    peak = 0
    while not racing.done():
        peak = max(peak, await db.fetchval(held))
    peak = max(peak, await db.fetchval(held))
    return sum(task is not None for task in await racing), peak


async def test_a_lowered_quota_is_never_exceeded_once_every_replica_runs_it() -> None:
    with pg_schema_url(agents=2) as url, ExitStack() as stack:
        table = url.rsplit("schema=", 1)[1] + ".apcore_a2a_quota_slots"
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args.append("--cluster")

        def agent(quota: int) -> ExitStack:
            env = {**ENV, "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": str(quota)}
            inner = ExitStack()
            bases.append(inner.enter_context(cli_server(args, env=env))[0])
            return inner

        bases: list[str] = []
        a_run = stack.enter_context(agent(5))
        stack.enter_context(agent(2))
        a, b = bases
        db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                tasks = [await _parked(http, a) for _ in range(5)]
                assert None not in tasks  # in between: A serves up to its own quota
                assert await _parked(http, b) is None  # B counts A's five
                slots = dict(await db.fetch(f"SELECT slot, holder FROM {table}"))
                for slot in (0, 1, 2):  # three end: two left, above the new quota
                    await _cancel(http, a, slots[slot])
                a_run.close()  # A restarts with the new quota
                a_run = stack.enter_context(agent(2))
                a = bases[-1]
                served, peak = await _race(http, db, table, a, b)
                assert (served, peak) == (0, 2)  # was: (2, 4)
                await _cancel(http, b, slots[3])
                served, peak = await _race(http, db, table, a, b)
                assert (served, peak) == (1, 2)
        finally:
            await db.close()
