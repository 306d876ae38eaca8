"""Retention judges a finished task by when the database first saw it finished, not by its
status timestamp (cluster mode on PostgreSQL, two real agent processes, one of them with
its clock an hour behind).

Before: the purge compared ``last_updated`` (the status timestamp, by the clock of the
replica that saved the task) with the database's now, so a task finished on the replica
running behind was deleted at the next pass, before one finished seconds earlier on a
replica with a true clock.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import pytest

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from .._support import TLS, cli_server
from .test_killed_turn_claim_e2e import ENV, _send
from .test_turn_takeover_e2e import _args

asyncpg = pytest.importorskip("asyncpg")

#: a replica's clock an hour behind (imported by Python at its start): status timestamps
#: come from ``datetime.now``, which reads the C clock, so the class is replaced
_BEHIND = """\
import datetime as _d
import time as _time

_HOUR = _d.timedelta(hours=1)


class _Behind(_d.datetime):
    @classmethod
    def now(cls, tz=None):
        return super().now(tz) - _HOUR


_d.datetime = _Behind
_t = _time.time
_time.time = lambda: _t() - 3600
"""


async def _finished(http: httpx.AsyncClient, base: str) -> str:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"seconds": 0}}],
        "metadata": {"skillId": "jobs.sleep"},
    }
    task = (await _send(http, base, message))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return str(task["id"])


async def test_a_task_finished_on_a_replica_running_behind_is_kept_for_the_retention(
    tmp_path: Path,
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_BEHIND)
    env = {**ENV, "A2A_TASK_RETENTION_SECONDS": "4"}  # a purge every second on each
    behind = {**env, "PYTHONPATH": str(tmp_path)}
    with (
        pg_schema_url(agents=2) as url,
        cli_server(_args(url), env=env) as (a, _pa),
        cli_server(_args(url), env=behind) as (b, _pb),
    ):
        schema = url.rsplit("schema=", 1)[1]
        db = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
                first = await _finished(http, a)
                await asyncio.sleep(4)  # the second finishes a whole retention later
                second = await _finished(http, b)
                stored = f"SELECT count(*) FROM {schema}.tasks WHERE id = $1"
                deadline = time.monotonic() + 60  # a hang guard
                while await db.fetchval(stored, first):
                    assert time.monotonic() < deadline, "retention never deleted the task"
                    await asyncio.sleep(0.1)
                # Before: deleted at the first pass after it finished, an hour old by its
                # timestamp; now it is kept until a retention after it finished.
                assert await db.fetchval(stored, second) == 1
        finally:
            await db.close()
