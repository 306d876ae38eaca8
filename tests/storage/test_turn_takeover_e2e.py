"""What a replica may take over of another's claim on a parked task's wait, on PostgreSQL
with real agent processes: only a claim no live replica holds, judged by the database's
clock (never a replica's own).

* Rolling upgrade: a claim written by a release that named no replica (an old-style row,
  inserted here by SQL) of a task whose last run was on a replica retired since. Before,
  the next follow-up took it over at once, beside the old replica still continuing it:
  two runs of one task. Now it is refused as busy until the claim has been known for
  ``replica_timeout`` by the database's clock, and taken over after that.
* Clock skew: a replica whose clock runs an hour ahead judged every other replica dead by
  its own clock and took over a live replica's claim (its follow-up then waited on the
  row the live one was writing). Now it answers busy at once.
* A claim released before a follow-up's take-over looked left a note of an old claim,
  which made a later earlier-release claim of that turn seem old at once.
* Rolling upgrade, the other way: an earlier release holds a claim held when the task's
  row in ``apcore_a2a_task_claims`` names a live replica; this release's claims named none.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import Task
from google.protobuf.json_format import ParseDict

from apcore_a2a.storage.turns import turn_of

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import EXAMPLES, TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, _approve, _send

asyncpg = pytest.importorskip("asyncpg")

#: a replica's clock an hour ahead (imported by Python at its start)
_AHEAD = "import time\n_t = time.time\ntime.time = lambda: _t() + 3600\n"
BUSY = -32090


def _transfer() -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"to": "bob", "amount": 5}}],
        "metadata": {"skillId": "bank.transfer"},
    }


def _args(url: str) -> list[str]:
    return ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url, "--cluster"]


async def approved_when_free(
    http: httpx.AsyncClient, agent: str, task_id: str, seconds: float
) -> Any:
    """The first answer to approving *task_id* on *agent* that is not busy (-32090), tried
    every 0.5 s for *seconds* at most (a hang guard); else the last busy one."""
    answer: Any = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answer = await _send(http, agent, _approve(task_id))
        if "result" in answer:
            break
        assert answer["error"]["code"] == BUSY, answer
        await asyncio.sleep(0.5)
    return answer


async def _claimed_at_locked_row(
    db: Any, http: httpx.AsyncClient, base: str, schema: str, task_id: str
) -> asyncio.Future[Any]:
    """A follow-up sent to *base*, once it claimed the task's wait and waits for the task's
    row, which *db* locks (in a transaction it leaves open)."""
    await db.execute("BEGIN")
    await db.execute(f"SELECT 1 FROM {schema}.tasks WHERE id = $1 FOR UPDATE", task_id)
    follow_up = asyncio.ensure_future(_send(http, base, _approve(task_id)))
    claimed = f"SELECT count(*) FROM {schema}.apcore_a2a_task_turns WHERE task_id = $1"
    async with asyncio.timeout(30):  # a hang guard
        while not await db.fetchval(claimed, task_id):
            await asyncio.sleep(0.02)
    return follow_up


async def _connect() -> Any:
    return await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)


async def test_an_earlier_releases_claim_is_taken_over_only_once_old_by_the_databases_clock() -> (
    None
):
    with (
        pg_schema_url(agents=2) as url,
        cli_server(_args(url), env=ENV) as (a, _pa),
        cli_server(_args(url), env=ENV) as (b, _pb),
    ):
        schema = url.rsplit("schema=", 1)[1]
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            parked = (await _send(http, a, _transfer()))["result"]["task"]
            assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
            turn = turn_of(ParseDict(parked, Task(), ignore_unknown_fields=True))[:64]
            db = await _connect()
            try:  # an old replica's claim; the task's last replica retired since
                await db.execute(
                    f"INSERT INTO {schema}.apcore_a2a_task_turns (task_id, turn) VALUES ($1, $2)",
                    parked["id"],
                    turn,
                )
                await db.execute(
                    f"DELETE FROM {schema}.apcore_a2a_task_claims WHERE task_id = $1", parked["id"]
                )
            finally:
                await db.close()
            refused = await _send(http, b, _approve(parked["id"]))
            assert refused.get("error", {}).get("code") == BUSY, refused
            # a hang guard: taken over after 3 s
            answer = await approved_when_free(http, b, parked["id"], 30)
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer


async def test_a_replica_with_its_clock_ahead_takes_over_no_live_claim(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_AHEAD)
    ahead = {**ENV, "PYTHONPATH": str(tmp_path)}
    with (
        pg_schema_url(agents=2) as url,
        cli_server(_args(url), env=ENV) as (a, _pa),
        cli_server(_args(url), env=ahead) as (b, _pb),
    ):
        schema = url.rsplit("schema=", 1)[1]
        await asyncio.sleep(4)  # B has beaten for a whole replica_timeout: it judges others
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            parked = (await _send(http, a, _transfer()))["result"]["task"]
            db = await _connect()
            try:  # A's follow-up claims the wait, then waits for the task's row
                follow_up = await _claimed_at_locked_row(db, http, a, schema, parked["id"])
                async with asyncio.timeout(20):  # before: B took the claim, then waited too
                    other = await _send(http, b, _approve(parked["id"]))
                await db.execute("ROLLBACK")
            finally:
                await db.close()
            assert other.get("error", {}).get("code") == BUSY, other
            answer = await asyncio.wait_for(follow_up, 30)
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer


async def test_a_claim_is_held_by_an_earlier_releases_rule_too() -> None:
    """Rolling upgrade, the other way: an earlier release takes a claim over unless the
    task's row in apcore_a2a_task_claims names a live replica. A claim of this release's,
    of a task whose last replica was retired, named none there: an old replica's follow-up
    took it over beside the run."""
    with (
        pg_schema_url(agents=2) as url,
        cli_server(_args(url), env=ENV) as (a, _pa),
        cli_server(_args(url), env=ENV) as (b, _pb),
    ):
        schema = url.rsplit("schema=", 1)[1]
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            parked = (await _send(http, a, _transfer()))["result"]["task"]
            db = await _connect()
            try:  # the task's last replica retired; B's follow-up claims the wait, then waits
                await db.execute(
                    f"DELETE FROM {schema}.apcore_a2a_task_claims WHERE task_id = $1", parked["id"]
                )
                follow_up = await _claimed_at_locked_row(db, http, b, schema, parked["id"])
                held = await db.fetchval(  # the earlier release's test, by its own clock
                    f"SELECT EXISTS (SELECT 1 FROM {schema}.apcore_a2a_task_claims c"
                    f" JOIN {schema}.apcore_a2a_replicas r USING (replica_id)"
                    " WHERE c.task_id = $1 AND r.heartbeat_at > $2)",
                    parked["id"],
                    time.time() - 3,
                )
                await db.execute("ROLLBACK")
            finally:
                await db.close()
            assert held
            answer = await asyncio.wait_for(follow_up, 30)
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer


async def _waiting_on(holder: Any, db: Any) -> None:
    """Until a statement (the agent's) waits on a lock *holder* holds. *db* may be in a
    transaction (the holder itself): there ``pg_stat_activity`` is a snapshot taken at its
    first read, which never shows a backend that came later, so each look clears it."""
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
    async with asyncio.timeout(30):  # a hang guard
        while not await db.fetchval(waiting, holder.get_server_pid()):
            await asyncio.sleep(0.02)
            await db.execute("SELECT pg_stat_clear_snapshot()")


async def test_a_claim_gone_before_its_take_over_leaves_no_note_of_an_old_claim() -> None:
    """A follow-up meeting a claim that is released before its take-over looks (the other
    follow-up refused) noted an earlier release's claim there, known from then on: a later
    earlier-release claim of that turn was taken over at once, beside its run."""
    with pg_schema_url() as url, cli_server(_args(url), env=ENV) as (a, _pa):
        schema = url.rsplit("schema=", 1)[1]
        turns = f"{schema}.apcore_a2a_task_turns"
        await asyncio.sleep(4)  # A has beaten for a whole replica_timeout: it judges others
        async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
            parked = (await _send(http, a, _transfer()))["result"]["task"]
            turn = turn_of(ParseDict(parked, Task(), ignore_unknown_fields=True))[:64]
            claim = f"INSERT INTO {turns} (task_id, turn) VALUES ($1, $2)"
            one, two = await _connect(), await _connect()
            try:
                await one.execute("BEGIN")  # a claim being made, then released
                await one.execute(claim, parked["id"], turn)
                follow_up = asyncio.ensure_future(_send(http, a, _approve(parked["id"])))
                await _waiting_on(one, two)
                await two.execute("BEGIN")  # the take-over's look waits
                await two.execute(
                    f"LOCK TABLE {schema}.apcore_a2a_task_turn_claimants IN ACCESS EXCLUSIVE MODE"
                )
                await one.execute("COMMIT")
                await _waiting_on(two, one)
                await one.execute(f"DELETE FROM {turns} WHERE task_id = $1", parked["id"])
                await two.execute("ROLLBACK")
                busy = await asyncio.wait_for(follow_up, 30)
                assert busy.get("error", {}).get("code") == BUSY, busy
                await asyncio.sleep(3.5)  # a replica_timeout later, an old replica claims it
                await one.execute(claim, parked["id"], turn)
            finally:
                await one.close()
                await two.close()
            answer = await _send(http, a, _approve(parked["id"]))
            assert answer.get("error", {}).get("code") == BUSY, answer
