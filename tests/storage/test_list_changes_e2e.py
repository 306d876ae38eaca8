"""``ListTasks`` on SQLite and PostgreSQL while the caller's tasks change between pages,
filtered by nothing, by ``status``, by ``contextId`` and by both (JSON-RPC and REST).

Each page is the caller's tasks matching the filters that sort after the previous page's
last one, newest first (ties by id, tasks without a timestamp last), and ``totalSize``
counts the caller's matching tasks at that moment. Between pages a new task arrives
(newest: after the page token's position, so not in this walk, but counted), another
caller's task arrives in the same context and state (never listed, never counted), and a
task not yet listed finishes as completed (it moves ahead of the position and leaves a
``status`` filter's count). One failed task in two was stored by an older agent
(``failed``, protocol 0.3): the filter finds both spellings, in one order.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
from a2a.server.models import TaskModel
from sqlalchemy import insert, text, update

from apcore_a2a.storage._urls import create_engine, parse_store_url

from .._support import TLS, cli_server
from ._a2a import EXTENSIONS, walk_pages

A = {"X-API-Key": "key-a", "A2A-Version": "1.0"}
B = {"X-API-Key": "key-b", "A2A-Version": "1.0"}
START = datetime(2026, 1, 1)  # naive UTC, as the SDK stores it
PAGE = 7
FAILED = "TASK_STATE_FAILED"
#: (stored state, protocol version, the state A2A 1.0 names) by task number modulo 4
STATES = [(FAILED, "1.0", FAILED), ("TASK_STATE_COMPLETED", "1.0", "TASK_STATE_COMPLETED"),
          ("failed", "0.3", FAILED), ("TASK_STATE_WORKING", "1.0", "TASK_STATE_WORKING")]  # fmt: skip


def _status(state: str, at: datetime | None) -> dict[str, str]:
    stamp = {"timestamp": at.isoformat() + "Z"} if at is not None else {}
    return {"state": state, **stamp}


class Caller:
    """What the caller's tasks are, as the test changes them (the expected pages)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        #: id -> (timestamp or None, context, state as 1.0 names it)
        self.tasks: dict[str, tuple[datetime | None, str, str]] = {}

    @staticmethod
    def key(item: tuple[str, tuple[datetime | None, str, str]]) -> tuple[bool, datetime, str]:
        task_id, (at, _context, _state) = item
        return (at is not None, at or START, task_id)

    def matching(self, filters: dict[str, str]) -> list[str]:
        """The ids of the caller's tasks *filters* select, in the list's order."""
        found = [
            item
            for item in self.tasks.items()
            if filters.get("status", item[1][2]) == item[1][2]
            and filters.get("contextId", item[1][1]) == item[1][1]
        ]
        return [task_id for task_id, _ in sorted(found, key=self.key, reverse=True)]


async def _sql(url: str, statement: Any, rows: list[dict[str, Any]] | None = None) -> None:
    """Run *statement* as the SDK's model types its columns (SQLite compares times as the
    text SQLAlchemy writes; PostgreSQL's ``json`` takes the document, not its text)."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.begin() as conn:
            await conn.execute(statement, rows)
    finally:
        await engine.dispose()


def _insert(rows: list[dict[str, Any]]) -> Any:
    return insert(TaskModel).values(
        [{"kind": "task", "history": [], "context_id": row.pop("context"),
          "last_updated": row.pop("at"), "protocol_version": row.pop("version"), **row}
         for row in rows]
    )  # fmt: skip


async def _owners(url: str, task_ids: list[str]) -> list[str]:
    """The owners of *task_ids*, whose tasks are then deleted (the test fills the table)."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.begin() as conn:
            owners = []
            for task_id in task_ids:
                found = await conn.execute(text("SELECT owner FROM tasks WHERE id = :id"),
                                           {"id": task_id})  # fmt: skip
                owners.append(str(found.scalar_one()))
            await conn.execute(text("DELETE FROM tasks"))
            return owners
    finally:
        await engine.dispose()


async def _fill(url: str, caller: Caller, prefix: str, n: int) -> None:
    rows = []
    for g in range(1, n + 1):
        stored, version, state = STATES[g % 4]
        at = None if g % 25 == 0 else START - timedelta(seconds=g)
        context = "ctx-x" if g % 3 == 0 else f"ctx-{prefix}{g}"
        task_id = f"{prefix}-{g:04d}"
        rows.append({"id": task_id, "context": context, "owner": caller.owner, "at": at,
                     "status": _status(stored, at), "version": version})  # fmt: skip
        caller.tasks[task_id] = (at, context, state)
    await _sql(url, _insert(rows))


async def _change(url: str, mine: Caller, theirs: Caller, step: int, rest: list[str]) -> None:
    """Between two pages: a new task of each caller, and one not yet listed finishes."""
    for caller in (mine, theirs):
        at = START + timedelta(hours=1, seconds=step)
        task_id = f"{caller.owner[:1]}-new-{uuid.uuid4().hex[:8]}"
        row = {"id": task_id, "context": "ctx-x", "owner": caller.owner, "at": at,
               "status": _status(FAILED, at), "version": "1.0"}  # fmt: skip
        await _sql(url, _insert([row]))
        caller.tasks[task_id] = (at, "ctx-x", FAILED)
    if rest:
        task_id, at = rest[-1], START + timedelta(hours=2, seconds=step)
        status = _status("TASK_STATE_COMPLETED", at)
        finish = update(TaskModel).where(TaskModel.id == task_id)
        await _sql(url, finish.values(status=status, last_updated=at, protocol_version="1.0"))
        mine.tasks[task_id] = (at, mine.tasks[task_id][1], "TASK_STATE_COMPLETED")


async def test_pages_follow_the_list_while_tasks_arrive_and_finish(sql_url: str) -> None:
    args = ["--extensions-dir", EXTENSIONS, "--task-store", sql_url, "--log-level",
            "warning", "--api-key", "key-a=a", "--api-key", "key-b=b"]  # fmt: skip
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"a": 1, "b": 2}}],
               "metadata": {"skillId": "math.add"}}  # fmt: skip
    with cli_server(args) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
            sent = []
            for headers in (A, B):  # the owner each key's tasks are stored under
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                        "params": {"message": {**message, "messageId": uuid.uuid4().hex}}}  # fmt: skip
                answer = (await http.post("/", json=body, headers=headers)).json()
                sent.append(answer["result"]["task"]["id"])
            owner_a, owner_b = await _owners(sql_url, sent)
            mine, theirs = Caller(owner_a), Caller(owner_b)
            await _fill(sql_url, mine, "a", 120)
            await _fill(sql_url, theirs, "b", 120)

            steps = itertools.count(1)

            async def between(later: list[str]) -> None:
                await _change(sql_url, mine, theirs, next(steps), later)

            walks = [({}, False), ({"status": FAILED}, False), ({"contextId": "ctx-x"}, False),
                     ({"status": FAILED, "contextId": "ctx-x"}, False),
                     ({"status": FAILED, "contextId": "ctx-x"}, True)]  # fmt: skip
            for filters, rest in walks:
                pages = await walk_pages(http, A, rest, filters, PAGE, mine.matching, between)
                assert pages > 2, filters
