"""A quota lowered across replicas (cluster mode on PostgreSQL, and on SQLite, whose
workers share one file): once every replica runs the lower setting, the caller is never
served past it. (SQLite takes no advisory turn: its ``BEGIN IMMEDIATE`` serializes takes.)

Replica A ran with ``max_unfinished_tasks_per_caller`` 5 and its caller holds tasks at
slots up to 4; the quota is now 2 everywhere (A restarted with it, or B started with it:
the tasks' slots are in the shared table and outlive A's setting). Before, a take at the
new quota inserted its random slot below 2 whenever that one was free, without counting
the rows held above it: with slots 3 and 4 held, twelve racing takes got two through
(four unfinished tasks against a quota of 2). Rows above a quota now count: a take at
that quota is served only while fewer than its limit are held, whatever their numbers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from sqlalchemy import event, select

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage import open_stores
from apcore_a2a.storage._replicas import replicas_table
from apcore_a2a.storage._slot_rows import turn_above
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.quota_slots import TASK_SCOPE, SqlQuotaSlots, slots_table
from apcore_a2a.storage.stores import Stores

from .._postgres import pg_schema_url
from ._helpers import settings
from .test_quota_slots_freed import CALLER
from .test_quota_slots_freed import _replica as _judging_replica

OLD, NEW = 5, 2


async def _replica(url: str) -> tuple[Stores, SqlQuotaSlots]:
    """A started cluster replica on *url*, and its quota slots, that never counts the other
    replicas of these tests dead: with a replica timeout of 1 s, a loaded machine delayed a
    heartbeat past it, and the other replica freed this one's leases (the rule for a dead
    replica's). A take alone then counted one a rename would refuse (``rename`` below)."""
    stores = open_stores(url, settings(cluster=True, cluster_replica_timeout=3600.0))
    await stores.start()
    assert stores.quota_slots is not None
    return stores, stores.quota_slots


async def _slot_of(slots: SqlQuotaSlots) -> dict[int, str]:
    """slot number -> holder of the caller's task slots."""
    c = slots_table.c
    async with slots.engine.connect() as conn:
        rows = await conn.execute(
            select(c.slot, c.holder).where(c.scope == TASK_SCOPE, c.subject == CALLER)
        )
        return {slot: holder for slot, holder in rows}


async def _answered(slots: SqlQuotaSlots, holder: str, limit: int) -> bool:
    """A take at *limit*, tried again while answered "retry shortly" (another take's count
    held past its wait: a loaded machine's honest answer), as its caller would."""
    async with asyncio.timeout(120):  # a hang guard
        while True:
            try:
                return await slots.take(TASK_SCOPE, CALLER, holder, limit)
            except StoreUnavailableError:
                await asyncio.sleep(0.05)


async def _race(*slots: SqlQuotaSlots, limit: int, each: int = 6) -> int:
    """How many of ``each`` takes per replica, all at once, at *limit* were served."""
    takes = [_answered(s, f"race-{id(s)}-{limit}-{n}", limit) for n in range(each) for s in slots]
    return sum(await asyncio.gather(*takes))


async def test_a_lowered_quota_counts_the_slots_held_above_it(sql_url: str) -> None:
    a, slots_a = await _replica(sql_url)
    b, slots_b = await _replica(sql_url)
    try:
        for n in range(OLD):  # five unfinished tasks under the old quota
            assert await slots_a.take(TASK_SCOPE, CALLER, f"request-{n}", OLD)
            assert await slots_a.rename(TASK_SCOPE, f"request-{n}", f"task-{n}", OLD)
        held = await _slot_of(slots_a)
        assert sorted(held) == list(range(OLD))
        for slot in (0, 1, 2):  # three end: two left, at slots 3 and 4
            await slots_b.give_back(TASK_SCOPE, held[slot])
        assert await _race(slots_a, slots_b, limit=NEW) == 0  # was: 2
        await slots_b.give_back(TASK_SCOPE, held[3])  # one left above the new quota
        assert await _race(slots_a, slots_b, limit=NEW) == 1
        assert len(await _slot_of(slots_a)) == NEW
    finally:
        await a.aclose()
        await b.aclose()


async def _taken(slots: SqlQuotaSlots, holder: str) -> bool:
    """Whether a take at the new quota was served ("retry shortly" read as not yet)."""
    try:
        return await slots.take(TASK_SCOPE, CALLER, holder, NEW)
    except StoreUnavailableError:
        return False


async def test_a_replica_counted_dead_while_alive_never_puts_the_caller_past_the_quota(
    pg_url: str,
) -> None:
    """Replica A's heartbeats wait (its row locked, as a paused process's would not come)
    while it holds a take at the lowered quota; B counts A dead, frees A's lease and is
    served in its place. A, alive all along, then hands its slot to its task: the rename
    finds no row and every slot taken, and is refused (the request cancels its task), so
    the caller holds its quota of tasks, never more, however A's lease ended."""
    a, slots_a = await _judging_replica(pg_url)
    b, slots_b = await _judging_replica(pg_url)
    try:
        await _one_past(slots_a)
        assert await slots_a.take(TASK_SCOPE, CALLER, "a", NEW)
        engine = create_engine(parse_store_url(pg_url))
        try:
            async with engine.begin() as conn:  # A's beats wait for this lock
                of_a = replicas_table.c.replica_id == slots_a.registry.replica_id
                await conn.execute(select(replicas_table).where(of_a).with_for_update())
                async with asyncio.timeout(60):  # a hang guard
                    # refused until B counts A dead (B itself beating steadily for 1 s)
                    while not await _taken(slots_b, "b"):
                        await asyncio.sleep(0.05)
                assert await slots_b.rename(TASK_SCOPE, "b", "task-b", NEW)
        finally:
            await engine.dispose()
        assert not await slots_a.rename(TASK_SCOPE, "a", "task-a", NEW)
        held = await slots_a.holders(TASK_SCOPE, CALLER)
        assert len(held) == NEW and "task-b" in held and "task-a" not in held
    finally:
        await a.aclose()
        await b.aclose()


async def test_in_between_the_higher_quota_serves_up_to_its_own(sql_url: str) -> None:
    """While A still runs the old quota, it serves up to its own; B, on the new one,
    counts A's tasks and serves none past 2 held."""
    a, slots_a = await _replica(sql_url)
    b, slots_b = await _replica(sql_url)
    try:
        assert await _race(slots_b, limit=NEW) == NEW
        assert await _race(slots_a, limit=OLD) == OLD - NEW
        assert await _race(slots_b, limit=NEW) == 0
        assert len(await _slot_of(slots_a)) == OLD
    finally:
        await a.aclose()
        await b.aclose()


async def _one_past(slots: SqlQuotaSlots) -> None:
    """The caller holds one task, at slot 4: past the new quota, one slot below it free."""
    for n in range(OLD):
        assert await slots.take(TASK_SCOPE, CALLER, f"request-{n}", OLD)
        assert await slots.rename(TASK_SCOPE, f"request-{n}", f"task-{n}", OLD)
    held = await _slot_of(slots)
    for slot in (0, 1, 2, 3):
        await slots.give_back(TASK_SCOPE, held[slot])


@contextmanager
def tries(slots: SqlQuotaSlots) -> Iterator[asyncio.Event]:
    """An event set once a take of *slots* has tried the turn (the driver sent the try)."""
    tried = asyncio.Event()
    loop = asyncio.get_running_loop()

    def sent(*args: Any) -> None:
        if "pg_try_advisory_xact_lock" in args[2]:  # (conn, cursor, statement, ...)
            loop.call_soon_threadsafe(tried.set)

    sync = slots.engine.sync_engine
    event.listen(sync, "after_cursor_execute", sent)
    try:
        yield tried
    finally:
        event.remove(sync, "after_cursor_execute", sent)


@asynccontextmanager
async def counting(
    pg_url: str, caller: str = CALLER, limit: int = NEW, scope: str = TASK_SCOPE
) -> AsyncIterator[None]:
    """Another take's count of *caller*'s rows of *scope* at *limit*, its turn held until
    the block ends: on a connection of its own, as another replica's take holds it (a
    replica's own sessions end once idle in a transaction for its replica timeout)."""
    engine = create_engine(parse_store_url(pg_url))
    try:
        async with engine.begin() as conn:
            await turn_above(conn, scope, caller, limit)
            yield
    finally:
        await engine.dispose()


async def test_a_count_in_another_schema_never_refuses_a_take(pg_url: str) -> None:
    """Agents in two schemas of one database, and in each a caller of the same key holding
    a task past the lowered quota: while a take counts the caller's rows in A, B's take is
    not refused for it. In this release it waits for that count, then is served: the count
    also takes the earlier releases' key, one for the whole database, so that their
    replicas take turns with this one's in a rolling upgrade (``test_turn_key_upgrade.py``);
    the next release counts under the schema's key alone, and B's take is served at once.
    Before the schema's key, B's take was refused while A counted (-32091)."""
    async with pg_schema_url(agents=1) as other_url:
        a, slots_a = await _replica(pg_url)
        b, slots_b = await _replica(other_url)
        try:
            await _one_past(slots_a)
            await _one_past(slots_b)
            with tries(slots_b) as tried:
                async with counting(pg_url):  # A's turn, held
                    take = asyncio.ensure_future(slots_b.take(TASK_SCOPE, CALLER, "b", NEW))
                    async with asyncio.timeout(10):  # a hang guard
                        await tried.wait()  # B's take met A's count
                async with asyncio.timeout(10):
                    assert await take
            assert await slots_a.take(TASK_SCOPE, CALLER, "a", NEW)
        finally:
            await a.aclose()
            await b.aclose()
