"""A task whose request's quota slot was freed while its replica was paused still counts
(cluster mode on PostgreSQL, two real agent processes, SIGSTOP).

Replica A takes the caller's only slot (``max_unfinished_tasks_per_caller`` 1) for a
request whose module works a while, then asks for input; A is paused before anything of
the task is stored. B counts A dead and, with the caller at its quota there, frees A's
slot and parks a task of its own with it. A resumes and parks its task too: the rename of
the request's slot to the task's id found no row. Before, it updated nothing and said
nothing: once B's task was canceled, the caller had A's parked task counted by no slot
and parked a third one beside it (two unfinished with a quota of 1).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server, sse_frames
from .test_killed_turn_claim_e2e import ENV, V1, _send

asyncpg = pytest.importorskip("asyncpg")

QUOTA_EXCEEDED = -32091
_ASK = """\
import time

from pydantic import BaseModel

from apcore_a2a import InputRequired


class AskIn(BaseModel):
    seconds: float


class AskOut(BaseModel):
    text: str


class Ask:
    input_schema = AskIn
    output_schema = AskOut
    description = "Work a while, then ask for input"

    def execute(self, inputs, context):
        time.sleep(inputs["seconds"])
        raise InputRequired("And then?", field="text")
"""


def _ask(seconds: float) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"seconds": seconds}}],
        "metadata": {"skillId": "slow.ask"},
    }


async def _stream(http: httpx.AsyncClient, base: str, message: dict[str, Any]) -> Any:
    """The last event of a streamed send (its frames' ``result``)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    body["params"] = {"message": message}
    last: Any = None
    async with http.stream("POST", base + "/", json=body, headers=V1) as response:
        async for _id, event in sse_frames(response):
            last = event
    return last


@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
async def test_a_task_whose_slot_was_freed_while_paused_is_counted(
    tmp_path: Path, streamed: bool
) -> None:
    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "ask.py").write_text(_ASK)
    env = {**ENV, "A2A_MAX_UNFINISHED_TASKS_PER_CALLER": "1"}
    async with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(tmp_path), "--task-store", url, "--cluster"]
        with cli_server(args, env=env) as (a, pa), cli_server(args, env=env) as (b, _pb):
            schema = url.rsplit("schema=", 1)[1]
            async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                await asyncio.sleep(4)  # B has beaten a whole replica timeout: it judges A
                send = _stream if streamed else _send
                asking = asyncio.ensure_future(send(http, a, _ask(2)))
                db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
                try:
                    slots = f"SELECT count(*) FROM {schema}.apcore_a2a_quota_slots"
                    slots += " WHERE scope = 'task'"
                    async with asyncio.timeout(30):  # a hang guard
                        while not await db.fetchval(slots):  # A's request took the slot
                            await asyncio.sleep(0.01)
                    os.kill(pa.pid, signal.SIGSTOP)  # its task is not stored yet
                    try:
                        parked: Any = None
                        deadline = time.monotonic() + 30  # B counts A dead after 3 s
                        while parked is None or "error" in parked:
                            assert time.monotonic() < deadline, parked
                            await asyncio.sleep(0.5)
                            parked = await _send(http, b, _ask(0))
                    finally:
                        os.kill(pa.pid, signal.SIGCONT)
                    first = parked["result"]["task"]
                    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
                    answer = await asyncio.wait_for(asking, 30)
                    parked_now = f"SELECT count(*) FROM {schema}.tasks"
                    parked_now += " WHERE status->>'state' = 'TASK_STATE_INPUT_REQUIRED'"
                    # Before: answered parked, both tasks unfinished with a quota of 1.
                    if not streamed:  # a stream has shown the task parked: it ends so
                        assert answer.get("error", {}).get("code") == QUOTA_EXCEEDED, answer
                    assert await db.fetchval(parked_now) == 1  # A's canceled, B's parked
                finally:
                    await db.close()
