"""A replica paused between its claim of a parked task's wait and its first save runs no
module of that turn when another replica took the claim over meanwhile (PostgreSQL, two
real agent processes).

A's whole process stalls for 8 s right after its follow-up claimed the wait (a
``sitecustomize`` blocks its event loop there once, as a long GC pause or a frozen VM
would; its heartbeats stop with it). Once A counts as dead, B's follow-up takes the claim
over and runs the turn; its module is still working when A wakes. A's save then meets a
newer task, which is not finished, and a2a-sdk saves A's event again on it. Before: both
modules ran (the module's journal had two lines), though one answer continued the wait.
Now a run checks, as it deletes its claim after saving ``working``, that the claim still
named its replica; A's had been taken over, so A refuses its follow-up busy (-32090)
and only B's module runs. Nor is A's message in the task's history: A's run read the task
B had continued, past the wait A claimed, and refuses before it saves anything.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._postgres import pg_schema_url
from .._support import TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, _send
from .test_lost_working_save_e2e import _get
from .test_turn_takeover_e2e import BUSY

pytest.importorskip("asyncpg")

_ONCE = """\
import os
import time

from pydantic import BaseModel

from apcore_a2a import InputRequired


class OnceIn(BaseModel):
    answer: str = ""


class OnceOut(BaseModel):
    text: str


class Once:
    input_schema = OnceIn
    output_schema = OnceOut
    description = "Ask, then work on the answer; each call noted in a journal"

    def execute(self, inputs, context):
        with open(os.environ["TEST_JOURNAL"], "a") as journal:  # every call
            journal.write((inputs.get("answer") or "asked") + "\\n")
        if not inputs.get("answer"):
            raise InputRequired("Go?", field="answer")
        time.sleep(8)  # still working when the paused replica wakes
        return {"text": "done"}
"""


#: A's pause: once, when the file the environment names exists, right after a claim
_PAUSE = """\
import os
import time

from apcore_a2a.storage.turns import SqlTurnClaims

_claim = SqlTurnClaims.claim


async def claim(self, task):
    won = await _claim(self, task)
    trigger = os.environ["TEST_PAUSE_AFTER_CLAIM"]
    if won and os.path.exists(trigger):
        os.remove(trigger)
        time.sleep(8)  # the whole process stalls: no heartbeat, no statement
    return won


SqlTurnClaims.claim = claim
"""


def _message(parts: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts, **more}


async def test_a_turn_taken_over_from_a_paused_replica_runs_its_module_once(
    tmp_path: Path,
) -> None:
    (tmp_path / "ext" / "probe").mkdir(parents=True)
    (tmp_path / "ext" / "probe" / "once.py").write_text(_ONCE)
    journal = tmp_path / "journal.txt"
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_PAUSE)
    trigger = tmp_path / "pause"
    env = {**ENV, "TEST_JOURNAL": str(journal)}
    paused = {**env, "PYTHONPATH": str(tmp_path / "site"), "TEST_PAUSE_AFTER_CLAIM": str(trigger)}
    async with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(tmp_path / "ext"), "--cluster", "--task-store", url]
        with cli_server(args, env=paused) as (a, _pa), cli_server(args, env=env) as (b, _pb):
            async with httpx.AsyncClient(timeout=90, verify=TLS) as http:
                asked = _message([{"data": {"answer": ""}}])
                asked["metadata"] = {"skillId": "probe.once"}
                parked = (await _send(http, b, asked))["result"]["task"]
                assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
                task_id = parked["id"]
                await asyncio.sleep(4)  # B has beaten a whole replica timeout: it judges A
                trigger.touch()
                on_a = asyncio.ensure_future(
                    _send(http, a, _message([{"text": "from A"}], taskId=task_id))
                )
                async with asyncio.timeout(30):  # a hang guard
                    while trigger.exists():  # A claimed the wait, and stalls
                        await asyncio.sleep(0.02)
                from_b: Any = None
                async with asyncio.timeout(60):  # B counts A dead after 3 s
                    while True:
                        follow_up = _message([{"text": "from B"}], taskId=task_id)
                        from_b = await _send(http, b, follow_up)
                        if "result" in from_b:
                            break
                        assert from_b["error"]["code"] == BUSY, from_b
                        await asyncio.sleep(0.2)
                from_a = await asyncio.wait_for(on_a, 60)
                task = await _get(http, b, task_id)
    said = [part.get("text") for message in task["history"] for part in message["parts"]]
    assert "from A" not in said, said  # was: A's refused message in the task's history
    lines = journal.read_text().splitlines()
    # Before: ['asked', 'from B', 'from A']: A's module ran too, on the same wait.
    assert lines == ["asked", "from B"], (lines, from_a, from_b)
    assert from_b["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", from_b
    assert from_a.get("error", {}).get("code") == BUSY, from_a
