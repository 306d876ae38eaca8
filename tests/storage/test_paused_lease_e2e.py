"""A replica paused past the replica timeout keeps no lease of a quota slot it may have
lost (cluster mode on PostgreSQL, two real agent processes, SIGSTOP).

While A is paused, B counts it dead and frees its slots when a caller is at its quota
there (``SqlQuotaSlots._reclaim``). Before: A, resumed, still kept the slot of a request
of that caller, given back at the request's end, as a lease for the caller's next request,
and handed it out without its row: with ``max_unfinished_tasks_per_caller`` 1 the caller
had a task parked on B and another one on A.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, _send
from .test_turn_takeover_e2e import _args, _transfer

asyncpg = pytest.importorskip("asyncpg")

QUOTA_EXCEEDED = -32091


async def test_a_resumed_replica_hands_out_no_slot_it_lost_while_paused() -> None:
    env = {**ENV, "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": "1"}
    with (
        pg_schema_url(agents=2) as url,
        cli_server(_args(url), env=env) as (a, pa),
        cli_server(_args(url), env=env) as (b, _pb),
    ):
        schema = url.rsplit("schema=", 1)[1]
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            sleep = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"seconds": 30}}],
                "metadata": {"skillId": "jobs.sleep"},
            }
            working = asyncio.ensure_future(_send(http, a, sleep))
            db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
            try:
                slots = f"SELECT count(*) FROM {schema}.apcore_a2a_quota_slots WHERE scope = 'task'"
                deadline = time.monotonic() + 30  # a hang guard
                while not await db.fetchval(slots):  # A's request takes the caller's slot
                    assert time.monotonic() < deadline, working.done() and working.result()
                    await asyncio.sleep(0.05)
            finally:
                await db.close()
            refused = await _send(http, b, _transfer())
            assert refused["error"]["code"] == QUOTA_EXCEEDED, refused
            os.kill(pa.pid, signal.SIGSTOP)
            try:
                parked: Any = None
                deadline = time.monotonic() + 30  # B counts A dead after 3 s
                while parked is None or "error" in parked:
                    assert time.monotonic() < deadline, parked
                    await asyncio.sleep(0.5)
                    parked = await _send(http, b, _transfer())
                assert parked["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            finally:
                os.kill(pa.pid, signal.SIGCONT)
            await working  # A's task, failed on B as A's orphan: its slot given back on A
            again = await _send(http, a, _transfer())
            assert again.get("error", {}).get("code") == QUOTA_EXCEEDED, again  # was: parked
