"""Pages: what ``ListTasks`` costs one caller as its own task count grows.

``python -m benchmarks.growth --dimensions pages [--pages 1000,10000] [--page-size 50]``
(and ``--backends``, ``--modes``: ``single``, ``cluster``, or ``app``, an application's own
a2a-sdk ``DatabaseTaskStore`` on the same database as ``task_store``). One caller holds *n*
tasks of its own (inserted by SQL; memory: saved), one in ten in one context and one in
ten failed. It pages through them (``pageSize`` *P*, following ``nextPageToken`` to the
end), then reads the second page filtered by ``contextId`` and by ``status``. The calls go
to the task store chain the agent serves ``ListTasks`` from (``open_stores``, started as
``serve`` starts it), in this process, so each backend can be counted with a counter that
does not depend on the clock:

The SQL stores hold as many tasks of 100 other callers besides. With ``--unreadable P``
(SQL stores), P % of the caller's rows (none in the big context or failed) hold a 0.3
state name in a 1.0 row, which no reading of the row accepts: pages leave them out
(``docs/storage.md``, *Unreadable rows*), and the counts show what that costs a page.

* PostgreSQL (single and ``--cluster``): rows of ``tasks`` read from the table
  (``pg_stat_user_tables``: ``seq_tup_read + idx_tup_fetch``) and index entries read
  (``pg_stat_user_indexes.idx_tup_read``), after ``VACUUM ANALYZE`` (autovacuum's state);
* SQLite: virtual-machine steps of the statements the store ran, replayed on the same
  file with a progress handler called at every step (``sqlite3.set_progress_handler``);
* memory: Python function calls (``sys.setprofile`` ``call`` and ``c_call`` events).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.cluster_streams import _pg, _store, rows_read

OWNER = "bench-caller"
#: one task in this many is in the big context, and one (another) failed
SHARE = 10
BIG_CONTEXT = "ctx-big"


@dataclass
class PagesRow:
    backend: str
    mode: str
    tasks: int
    page_size: int
    unit: str
    pages: int = 0
    #: percent of the caller's rows that cannot be read as a task
    unreadable: int = 0
    #: what was counted -> count (``rows``; PostgreSQL also ``index``)
    first: dict[str, int] = field(default_factory=dict)
    second: dict[str, int] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)
    walk: dict[str, int] = field(default_factory=dict)
    by_context: dict[str, int] = field(default_factory=dict)
    by_status: dict[str, int] = field(default_factory=dict)


def _damaged(g: int, unreadable: int) -> bool:
    """Whether the caller's task number *g* is one of the *unreadable* percent (one in
    100 / *unreadable*, at an offset that is neither in the big context nor failed)."""
    return unreadable > 0 and g % (100 // unreadable) == 5


def _task_rows(n: int, prefix: str = "mine") -> list[tuple[str, str, datetime, str]]:
    """(id, context, last updated, state) of the caller's *n* tasks, newest first."""
    start = datetime(2026, 1, 1)  # naive UTC, as the SDK stores it
    rows = []
    for g in range(1, n + 1):
        if prefix != "mine":
            rows.append((f"{prefix}-{g:07d}", f"{prefix}-{g}", start, "TASK_STATE_COMPLETED"))
            continue
        context = BIG_CONTEXT if g % SHARE == 0 else f"ctx-{g}"
        state = "TASK_STATE_FAILED" if g % SHARE == 1 else "TASK_STATE_COMPLETED"
        rows.append((f"mine-{g:07d}", context, start - timedelta(seconds=g), state))
    return rows


async def _fill_sql(engine: Any, n: int, unreadable: int) -> None:
    from a2a.server.models import TaskModel
    from sqlalchemy import insert

    values = [
        {"id": i, "context_id": c, "kind": "task", "owner": OWNER, "last_updated": t,
         "status": {"state": s, "timestamp": t.isoformat() + "Z"}, "history": [], "artifacts": [],
         "protocol_version": "1.0"}
        for i, c, t, s in _task_rows(n)
    ]  # fmt: skip
    for g, row in enumerate(values, start=1):
        if _damaged(g, unreadable):
            row["status"] = {**row["status"], "state": "completed"}  # the 0.3 name
    # As many tasks of 100 other callers: the caller's are not the whole table.
    others = [
        {**row, "owner": f"other-{k % 100}"}
        for k, row in enumerate(
            {**values[0], "id": i, "context_id": c} for i, c, _t, _s in _task_rows(n, "other")
        )
    ]
    values += others
    async with engine.begin() as conn:
        for start in range(0, len(values), 5000):
            await conn.execute(insert(TaskModel), values[start : start + 5000])


async def _fill_memory(stores: Any, n: int, context: Any) -> None:
    from a2a.types import Task, TaskState, TaskStatus

    for i, c, t, s in _task_rows(n):
        status = TaskStatus(state=TaskState.Value(s))
        status.timestamp.FromDatetime(t)
        await stores.task_store.save(Task(id=i, context_id=c, status=status), context)


class _Counter:
    """One backend's counts around a call (see the module docstring)."""

    def __init__(self, backend: str, url: str, database: str | None, engine: Any) -> None:
        self.backend, self.url, self.database = backend, url, database
        self.statements: list[tuple[str, Any]] = []
        if backend == "sqlite":
            from sqlalchemy import event

            @event.listens_for(engine.sync_engine, "before_cursor_execute")
            def _noted(_c: Any, _cur: Any, statement: str, params: Any, *_: Any) -> None:
                self.statements.append((statement, params))

    async def read(self) -> dict[str, int]:
        if self.database is None:
            return {}

        rows = await rows_read(self.database, ("tasks",))
        index = await _pg(
            "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes "
            "WHERE relname = 'tasks'",
            self.database,
        )
        return {"rows": rows, "index": int(index)}

    async def count(self, call: Any) -> tuple[Any, dict[str, int]]:
        """Run *call* (a coroutine function): (its result, its counts)."""
        if self.backend == "memory":
            calls = 0

            def profile(_frame: Any, event: str, _arg: Any) -> None:
                nonlocal calls
                calls += event in ("call", "c_call")

            sys.setprofile(profile)
            try:
                result = await call()
            finally:
                sys.setprofile(None)
            return result, {"calls": calls}
        if self.backend == "sqlite":
            self.statements.clear()
            result = await call()
            return result, {"steps": self._replay()}
        before = await self.read()
        result = await call()
        after = await self.read()
        return result, {k: after[k] - before[k] for k in after}

    def _replay(self) -> int:
        steps = 0

        def step() -> int:
            nonlocal steps
            steps += 1
            return 0

        conn = sqlite3.connect(self.url.removeprefix("sqlite:///"))
        try:
            conn.set_progress_handler(step, 1)
            for statement, params in self.statements:
                if statement.lstrip().upper().startswith("SELECT"):
                    conn.execute(statement, params).fetchall()
        finally:
            conn.close()
        return steps


async def _measure(backend: str, url: str, database: str | None, row: PagesRow) -> None:
    from a2a.server.context import ServerCallContext
    from a2a.types import ListTasksRequest, TaskState

    from apcore_a2a.settings import Settings
    from apcore_a2a.storage.memory import OwnerUser
    from apcore_a2a.storage.stores import open_stores

    settings = Settings(cluster=row.mode == "cluster", task_max_capacity=max(row.tasks, 10))
    target: Any = url
    if row.mode == "app":
        from a2a.server.tasks import DatabaseTaskStore

        from apcore_a2a.storage._urls import create_engine, parse_store_url

        target = DatabaseTaskStore(create_engine(parse_store_url(url)))
    stores = open_stores(target, settings)
    await stores.start()
    engine = stores.engine or getattr(target, "engine", None)
    try:
        context = ServerCallContext(user=OwnerUser(OWNER))
        if backend == "memory":
            await _fill_memory(stores, row.tasks, context)
        else:
            if row.mode == "app":
                await target.initialize()  # its table, as its first call would create it
            await _fill_sql(engine, row.tasks, row.unreadable)
        if database is not None:
            await _pg("VACUUM ANALYZE tasks", database)
        counter = _Counter(backend, url, database, engine)

        async def page(token: str = "", **filters: Any) -> Any:
            request = ListTasksRequest(page_size=row.page_size, page_token=token, **filters)
            return await stores.task_store.list(request, context)

        listed, row.first = await counter.count(page)
        token, seen = listed.next_page_token, len(listed.tasks)
        listed, row.second = await counter.count(lambda: page(token))
        seen += len(listed.tasks)

        async def rest() -> str:
            nonlocal seen
            token, pages = listed.next_page_token, 2
            while True:
                got = await page(token)
                seen += len(got.tasks)
                pages += 1
                if not got.next_page_token:
                    row.pages = pages
                    return token
                token = got.next_page_token

        last_token, row.walk = await counter.count(rest)
        readable = row.tasks - sum(_damaged(g, row.unreadable) for g in range(1, row.tasks + 1))
        if seen != readable:
            raise RuntimeError(f"paged through {seen} of {readable} readable tasks")
        _last, row.last = await counter.count(lambda: page(last_token))
        first = await page(context_id=BIG_CONTEXT)
        _, row.by_context = await counter.count(
            lambda: page(first.next_page_token, context_id=BIG_CONTEXT)
        )
        failed = TaskState.TASK_STATE_FAILED
        first = await page(status=failed)
        _, row.by_status = await counter.count(lambda: page(first.next_page_token, status=failed))
    finally:
        await stores.aclose()
        if row.mode == "app":
            await engine.dispose()  # the application's: the agent leaves it open


def measure_pages(
    backend: str, n: int, folder: Path, *, mode: str, page_size: int, unreadable: int = 0
) -> PagesRow:
    """One caller paging through *n* tasks of its own (see the module docstring) in a
    store of *mode*, of which *unreadable* percent cannot be read (SQL stores)."""
    units = {"postgresql": "rows", "sqlite": "steps", "memory": "calls"}
    row = PagesRow(backend, mode, n, page_size, units[backend], unreadable=unreadable)
    if backend == "memory":
        asyncio.run(_measure(backend, "memory://", None, row))
        return row
    with _store(backend, folder) as (url, database):
        asyncio.run(_measure(backend, url, database, row))
    return row


def _cell(counts: dict[str, int], per: int = 1) -> str:
    text = " / ".join(f"{v / per:,.0f}" for v in counts.values())
    return text or "—"


def render_pages(rows: list[PagesRow]) -> str:
    """The table of the pages dimension."""
    if not rows:
        return ""
    lines = [
        "One caller paging through *n* tasks of its own with `ListTasks` (`pageSize` *P*, "
        "following `nextPageToken` to the end), and the second page filtered by `contextId` "
        f"(*n*/{SHARE} tasks in the context) and by `status` (*n*/{SHARE} failed). "
        "PostgreSQL: rows of `tasks` read / index entries read; SQLite: VM steps of the "
        "store's statements; memory: Python calls. Per page; *walk* is the mean over the "
        "pages after the second.",
        "",
        "| store | mode | tasks | unreadable | P | unit | page 1 | page 2 | walk (mean) | "
        "last page | contextId, page 2 | status, page 2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = "rows / index" if r.backend == "postgresql" else r.unit
        lines.append(
            f"| {r.backend} | {r.mode} | {r.tasks:,} | {r.unreadable} % | {r.page_size} | {unit} | "
            f"{_cell(r.first)} | {_cell(r.second)} | {_cell(r.walk, max(r.pages - 2, 1))} | "
            f"{_cell(r.last)} | {_cell(r.by_context)} | {_cell(r.by_status)} |"
        )
    return "\n".join(lines) + "\n"
