"""The durable write path (storage/deferred.py) on a real database.

Writes are counted by a trigger on the SDK's ``tasks`` table, so the numbers are what
reached the database, whoever wrote them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from apcore_a2a.storage import INTERRUPTED_MESSAGE
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.deferred import WRITE_DELAY

from .._support import TLS, ServerProcess, cli_server
from ._a2a import EXTENSIONS

V1 = {"A2A-Version": "1.0"}

_TRIGGERS = {
    "sqlite": [
        "CREATE TABLE task_writes (task_id TEXT, state TEXT)",
        "CREATE TRIGGER task_inserted AFTER INSERT ON tasks BEGIN "
        "INSERT INTO task_writes VALUES (NEW.id, json_extract(NEW.status, '$.state')); END",
        "CREATE TRIGGER task_updated AFTER UPDATE ON tasks BEGIN "
        "INSERT INTO task_writes VALUES (NEW.id, json_extract(NEW.status, '$.state')); END",
    ],
    "postgresql": [
        "CREATE TABLE task_writes (task_id TEXT, state TEXT)",
        "CREATE FUNCTION task_written() RETURNS trigger AS $$ BEGIN "
        "INSERT INTO task_writes VALUES (NEW.id, NEW.status->>'state'); RETURN NEW; END $$ "
        "LANGUAGE plpgsql",
        "CREATE TRIGGER task_written AFTER INSERT OR UPDATE ON tasks "
        "FOR EACH ROW EXECUTE FUNCTION task_written()",
    ],
}


async def _sql(url: str, *statements: str) -> list[tuple[object, ...]]:
    """Run *statements* on the store's database; rows of the last one."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.begin() as conn:
            rows: list[tuple[object, ...]] = []
            for statement in statements:
                result = await conn.execute(text(statement))
                rows = [tuple(r) for r in result] if result.returns_rows else []
            return rows
    finally:
        await engine.dispose()


async def _count_writes(url: str) -> None:
    await _sql(url, *_TRIGGERS[parse_store_url(url).kind])


async def _writes(url: str) -> Counter[str]:
    return Counter(str(task_id) for task_id, _ in await _sql(url, "SELECT * FROM task_writes"))


def _body(skill: str, data: dict[str, object], **configuration: object) -> dict[str, object]:
    params: dict[str, object] = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": data}],
            "metadata": {"skillId": skill},
        }
    }
    if configuration:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


@contextlib.asynccontextmanager
async def _agent(url: str, *, count: bool = True) -> AsyncIterator[tuple[str, ServerProcess]]:
    """The examples agent on *url*, its writes counted from the start (*count*)."""
    args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--log-level", "warning"]
    with cli_server(args) as (base, proc):
        if count:
            await _count_writes(url)
        yield base, proc


@pytest.fixture
async def agent(sql_url: str) -> AsyncIterator[tuple[str, str, ServerProcess]]:
    async with _agent(sql_url) as (base, proc):
        yield base, sql_url, proc


async def test_concurrent_blocking_calls_write_each_task_once(
    agent: tuple[str, str, ServerProcess],
) -> None:
    base, url, _ = agent
    async with httpx.AsyncClient(base_url=base, headers=V1, timeout=30, verify=TLS) as http:

        async def timed(i: int) -> tuple[dict[str, Any], float]:
            start = time.monotonic()
            answer = await http.post("/", json=_body("math.add", {"a": i, "b": 1000}))
            return answer.json()["result"]["task"], time.monotonic() - start

        # Eight at once: their writes share transactions (group commit); each row its own.
        answered = await asyncio.gather(*(timed(i) for i in range(8)))
        tasks = [task for task, _ in answered]
        assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
        writes = await _writes(url)
        # One write per task, the answer's: submitted and working never reached the disk.
        # A task lives no longer than its call took here; one that outlived WRITE_DELAY (a
        # loaded machine) is rightly written when the delay ends too, another property.
        quick = {t["id"] for t, took in answered if took < WRITE_DELAY}
        assert {i: n for i, n in writes.items() if i in quick} == dict.fromkeys(quick, 1)
        assert writes.keys() == {t["id"] for t in tasks} and max(writes.values()) <= 2
        # Each stored row is its own task's, as answered.
        for i, task in enumerate(tasks):
            got = await http.post(
                "/",
                json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}},
            )
            stored = got.json()["result"]
            assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
            assert stored["artifacts"] == task["artifacts"]
            assert str(i + 1000) in str(stored["artifacts"])


async def test_a_task_whose_id_the_caller_holds_is_written_before_the_answer(
    agent: tuple[str, str, ServerProcess],
) -> None:
    base, url, _ = agent
    async with httpx.AsyncClient(base_url=base, headers=V1, timeout=30, verify=TLS) as http:
        answer = await http.post(
            "/", json=_body("jobs.sleep", {"seconds": 0.5}, returnImmediately=True)
        )
        task_id = answer.json()["result"]["task"]["id"]
        # Read straight from the database the moment the answer is in.
        rows = await _sql(url, f"SELECT id FROM tasks WHERE id = '{task_id}'")
        assert rows == [(task_id,)]


async def test_a_long_blocking_call_is_stored_and_recovered_after_kill_9(sql_url: str) -> None:
    async with (
        _agent(sql_url) as (base, proc),
        httpx.AsyncClient(base_url=base, headers=V1, timeout=60, verify=TLS) as http,
    ):
        call = asyncio.ensure_future(http.post("/", json=_body("jobs.sleep", {"seconds": 60})))
        # The running state is kept in memory for WRITE_DELAY, then written.
        deadline = time.monotonic() + WRITE_DELAY + 20
        rows: list[tuple[object, ...]] = []
        while not rows:
            assert time.monotonic() < deadline, "the running task was never written"
            rows = await _sql(sql_url, "SELECT task_id, state FROM task_writes")
            await asyncio.sleep(0.1)
        task_id = str(rows[0][0])
        assert {str(state) for _, state in rows} <= {
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
        }
        proc.kill9()
        with pytest.raises(httpx.HTTPError):
            await call
    async with (
        _agent(sql_url, count=False) as (base, _),
        httpx.AsyncClient(base_url=base, headers=V1, timeout=30, verify=TLS) as http,
    ):
        got = await http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
        )
    status = got.json()["result"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == INTERRUPTED_MESSAGE
