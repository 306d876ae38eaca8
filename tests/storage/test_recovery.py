"""Tasks left running by a dead process are failed; finished tasks stay intact."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable

import asyncpg
from a2a.server.cluster import TaskVersion, VersionedTaskStore
from a2a.types import Task, TaskState
from sqlalchemy import text
from sqlalchemy.engine import make_url

from apcore_a2a.storage import INTERRUPTED_MESSAGE, Stores, open_stores

from .._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER
from .._support import ROOT
from ._helpers import ctx, make_task, settings

FAST = {"cluster_heartbeat_interval": 0.2, "cluster_replica_timeout": 1.0}


async def put(stores: Stores, task: Task, user: str = "alice") -> None:
    store = stores.task_store
    if isinstance(store, VersionedTaskStore):
        found = await store.get(task.id, ctx(user))
        prev = found.version if found else TaskVersion.MISSING
        await store.save(task, event=None, prev=None, prev_version=prev, context=ctx(user))
    else:
        await store.save(task, ctx(user))


async def state_of(stores: Stores, task_id: str, user: str = "alice") -> Task:
    task = await stores.get_task(task_id, ctx(user))
    assert task is not None
    return task


async def eventually(check: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


def assert_interrupted(task: Task) -> None:
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert task.status.message.parts[0].text == INTERRUPTED_MESSAGE
    assert task.status.HasField("timestamp")


async def test_restart_fails_running_tasks_and_keeps_the_rest(sql_url: str) -> None:
    first = open_stores(sql_url, settings())
    await first.start()
    submitted = make_task(TaskState.TASK_STATE_SUBMITTED)
    working = make_task(TaskState.TASK_STATE_WORKING, text="in flight")
    done = make_task(TaskState.TASK_STATE_COMPLETED)
    waiting = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
    bobs = make_task(TaskState.TASK_STATE_WORKING)
    for task in (submitted, working, done, waiting):
        await put(first, task)
    await put(first, bobs, "bob")
    # The "crashed" process never closes its stores, and its lock on the database went
    # with it (the OS, the server drop it: test_one_owner.py); a new one starts on it.
    assert first._backend is not None
    await first._backend.owner.release()
    second = open_stores(sql_url, settings())
    try:
        await second.start()
        assert_interrupted(await state_of(second, submitted.id))
        interrupted = await state_of(second, working.id)
        assert_interrupted(interrupted)
        assert interrupted.history[0].parts[0].text == "in flight"
        assert interrupted.artifacts == working.artifacts
        assert_interrupted(await state_of(second, bobs.id, "bob"))
        assert await state_of(second, done.id) == done
        assert await state_of(second, waiting.id) == waiting
    finally:
        await second.aclose()
        await first.aclose()


async def test_cluster_replica_leaves_tasks_of_live_replicas_alone(sql_url: str) -> None:
    a = open_stores(sql_url, settings(cluster=True, **FAST))
    await a.start()
    b = open_stores(sql_url, settings(cluster=True, **FAST))
    try:
        running = make_task(TaskState.TASK_STATE_WORKING)
        await put(a, running)
        await b.start()
        await asyncio.sleep(1.5)  # longer than the replica timeout: A keeps heartbeating
        assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await b.aclose()
        await a.aclose()


async def test_cluster_startup_fails_unclaimed_running_tasks(sql_url: str) -> None:
    # A task written outside cluster mode (no claim) has no live replica running it.
    plain = open_stores(sql_url, settings())
    await plain.start()
    orphan = make_task(TaskState.TASK_STATE_WORKING)
    await put(plain, orphan)
    await plain.aclose()
    replica = open_stores(sql_url, settings(cluster=True, **FAST))
    try:
        await replica.start()
        assert_interrupted(await state_of(replica, orphan.id))
    finally:
        await replica.aclose()


async def test_cluster_graceful_shutdown_hands_orphans_over_at_once(sql_url: str) -> None:
    a = open_stores(sql_url, settings(cluster=True, **FAST))
    b = open_stores(
        sql_url,
        settings(cluster=True, cluster_heartbeat_interval=0.2, cluster_replica_timeout=30),
    )
    await a.start()
    await b.start()
    try:
        running = make_task(TaskState.TASK_STATE_WORKING)
        await put(a, running)
        await a.aclose()

        async def failed() -> bool:
            return (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_FAILED

        # B's replica timeout is 30 s, so only the zeroed heartbeat can explain this.
        await eventually(failed, timeout=20)
        assert_interrupted(await state_of(b, running.id))
    finally:
        await b.aclose()


_CRASHING_REPLICA = """
import asyncio, sys
from a2a.server.cluster import TaskVersion
from a2a.types import TaskState
from apcore_a2a.storage import open_stores
from tests.storage._helpers import ctx, make_task, settings

async def main(url, task_id):
    stores = open_stores(url, settings(cluster=True, cluster_heartbeat_interval=0.2,
                                       cluster_replica_timeout=1.0))
    await stores.start()
    task = make_task(TaskState.TASK_STATE_WORKING, task_id=task_id)
    await stores.task_store.save(task, event=None, prev=None, prev_version=TaskVersion.MISSING,
                                 context=ctx())
    print("ready", flush=True)
    await asyncio.sleep(600)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_cluster_kill_9_replica_tasks_are_failed_by_a_live_one(sql_url: str) -> None:
    task_id = "0b5b6c1e-6f0b-4c57-9d1e-000000000001"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CRASHING_REPLICA, sql_url, task_id],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    b = open_stores(sql_url, settings(cluster=True, **FAST))
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert line.strip() == "ready"
        await b.start()
        assert (await state_of(b, task_id)).status.state == TaskState.TASK_STATE_WORKING
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

        async def failed() -> bool:
            return (await state_of(b, task_id)).status.state == TaskState.TASK_STATE_FAILED

        await eventually(failed)
        assert_interrupted(await state_of(b, task_id))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        await b.aclose()


async def test_cluster_heartbeat_goes_on_while_an_orphan_is_locked(pg_url: str) -> None:
    """A replica paused (SIGSTOP, a hung VM) in the middle of a write holds its task's
    version row locked. Failing that orphan waits for the lock; the replica that does it
    must go on heartbeating meanwhile, or every replica stuck on the lock would be
    declared dead too and fail the others' live tasks once the lock is gone. And the
    paused replica, awake again, keeps its row and the claims of its new tasks."""
    slow = {"cluster_heartbeat_interval": 500, "cluster_replica_timeout": 1000}
    a = open_stores(pg_url, settings(cluster=True, **slow))  # beats only when told to
    b = open_stores(
        pg_url,
        settings(cluster=True, cluster_heartbeat_interval=0.2, cluster_replica_timeout=30),
    )
    await a.start()
    await b.start()
    assert b.engine is not None and a._backend is not None and b._backend is not None
    registry_a, registry_b = a._backend.registry, b._backend.registry
    assert registry_a is not None and registry_b is not None
    # The test reads through B's sessions: B ends the sessions named as A's.
    engine = b.engine
    running = make_task(TaskState.TASK_STATE_WORKING)
    await put(a, running)

    async def scalar(sql: str, **params: object) -> object:
        async with engine.connect() as conn:
            return (await conn.execute(text(sql), params)).scalar()

    beat_of_b = "SELECT heartbeat_at FROM apcore_a2a_replicas WHERE replica_id = :id"
    # Sessions the paused one blocks: the server is shared with other tests' lock waits.
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"
    schema = str(make_url(pg_url).query["schema"])
    where = {"host": PG_HOST, "port": PG_PORT, "user": PG_USER, "database": PG_DB}
    try:
        # A's write in flight when it paused: its task's version row stays locked, on a
        # session B cannot end (B ends the sessions named as A's: as if its role could not).
        paused = await asyncpg.connect(**where, server_settings={"search_path": schema})
        held = paused.transaction()
        await held.start()
        try:
            await paused.execute(
                "UPDATE task_versions SET version = version WHERE task_id = $1", running.id
            )
            await registry_a.deregister()  # A is dead for B from now on
            try:
                pid = await paused.fetchval("SELECT pg_backend_pid()")
                await eventually(lambda: scalar(waiting, pid=pid))  # B fails A's orphan: stuck
                stuck_at = await scalar(beat_of_b, id=registry_b.replica_id)
                assert isinstance(stuck_at, float)

                async def beating() -> bool:
                    now = await scalar(beat_of_b, id=registry_b.replica_id)
                    return isinstance(now, float) and now > stuck_at

                await eventually(beating, timeout=15)
                # A wakes: it beats and starts a new task before B's recovery is done.
                await registry_a.heartbeat()
                fresh = make_task(TaskState.TASK_STATE_WORKING)
                await put(a, fresh)
            finally:
                await held.rollback()
        finally:
            await paused.close()
        await eventually(lambda: _is_failed(b, running.id))  # the lock gone: failed
        await registry_b.retire(registry_a.replica_id)  # as B's recovery does next
        claimed = "SELECT replica_id FROM apcore_a2a_task_claims WHERE task_id = :id"
        assert await scalar(claimed, id=fresh.id) == registry_a.replica_id
        assert (await state_of(b, fresh.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await b.aclose()
        await a.aclose()


async def _is_failed(stores: Stores, task_id: str) -> bool:
    return (await state_of(stores, task_id)).status.state == TaskState.TASK_STATE_FAILED


async def test_cluster_replicas_that_could_not_beat_do_not_fail_each_others_tasks(
    pg_url: str,
) -> None:
    """No replica could write a heartbeat for longer than the replica timeout (the table
    locked here; a database outage, a stalled disk alike) while reads went on. Every
    heartbeat is then old, and a replica must not take its own stall for the others'
    death: they are alive, and their tasks run on."""
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    await b.start()
    assert a.engine is not None and b._backend is not None
    registry_b = b._backend.registry
    assert registry_b is not None
    try:
        running = make_task(TaskState.TASK_STATE_WORKING)
        await put(a, running)
        async with _replicas_stalled(a):
            pass
        # B beats again, and keeps beating for longer than the timeout: A does too, so B
        # has seen it alive since the stall.
        seen = registry_b.beats
        await eventually(lambda: registry_b.beats >= seen + 10)
        assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await b.aclose()
        await a.aclose()


async def test_cluster_replica_starting_after_an_outage_leaves_live_replicas_tasks(
    pg_url: str,
) -> None:
    """A replica starts just after a database outage longer than the replica timeout
    (crash-looping while the database was away, say), before the live replicas have
    beaten again: every heartbeat is old. It must leave their tasks to its heartbeat
    loop, which judges them once it could have seen them beat; it still fails at once
    the tasks of a replica that shut down cleanly."""
    slow = {"cluster_heartbeat_interval": 500, "cluster_replica_timeout": 1000}
    a = open_stores(pg_url, settings(cluster=True, **slow))  # beats only when told to
    gone = open_stores(pg_url, settings(cluster=True, **FAST))
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    await gone.start()
    assert a.engine is not None and a._backend is not None and b._backend is not None
    registry_a, registry_b = a._backend.registry, b._backend.registry
    assert registry_a is not None and registry_b is not None
    running = make_task(TaskState.TASK_STATE_WORKING)
    await put(a, running)
    handed_over = make_task(TaskState.TASK_STATE_WORKING)
    await put(gone, handed_over)
    await gone.aclose()
    # The outage: nobody could beat for a minute (A's last heartbeat is that old).
    async with a.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE apcore_a2a_replicas SET heartbeat_at = heartbeat_at - 60 "
                "WHERE replica_id = :id"
            ),
            {"id": registry_a.replica_id},
        )
    try:
        await b.start()
        assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
        assert_interrupted(await state_of(b, handed_over.id))
        # A beats again, and B keeps beating for longer than its timeout: A stays alive.
        seen = registry_b.beats
        while registry_b.beats < seen + 10:
            await registry_a.heartbeat()
            await asyncio.sleep(0.1)
        assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await b.aclose()
        await a.aclose()


async def _steady_pair(pg_url: str) -> tuple[Stores, Stores]:
    """Two replicas on *pg_url*, the second one beating for longer than its timeout."""
    a = open_stores(pg_url, settings(cluster=True, **FAST))
    b = open_stores(pg_url, settings(cluster=True, **FAST))
    await a.start()
    await b.start()
    assert b._backend is not None and b._backend.registry is not None
    registry_b = b._backend.registry
    await eventually(lambda: registry_b.beats >= 10)  # 2 s of beats: steady
    return a, b


@contextlib.asynccontextmanager
async def _replicas_stalled(stores: Stores) -> AsyncIterator[None]:
    """No replica can write a heartbeat for three replica timeouts (reads go on)."""
    assert stores.engine is not None
    async with stores.engine.connect() as stall:
        # A stall of the database, not a paused replica's transaction, which the server
        # ends after a replica timeout (docs/storage.md): this one lasts.
        await stall.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
        await stall.execute(text("LOCK TABLE apcore_a2a_replicas IN EXCLUSIVE MODE"))
        await asyncio.sleep(3 * FAST["cluster_replica_timeout"])
        try:
            yield
        finally:
            await stall.rollback()


async def test_cluster_replicas_stalled_now_do_not_fail_each_others_tasks(pg_url: str) -> None:
    """A stall that begins after the replicas have beaten steadily: while it lasts (a
    heartbeat write waiting, not failing), every heartbeat grows old, this replica's
    own too, and its recovery loop must not take that for the others' death."""
    a, b = await _steady_pair(pg_url)
    try:
        running = make_task(TaskState.TASK_STATE_WORKING)
        await put(a, running)
        async with _replicas_stalled(a):
            assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
        assert (await state_of(b, running.id)).status.state == TaskState.TASK_STATE_WORKING
    finally:
        await b.aclose()
        await a.aclose()


async def test_cluster_quota_slots_of_live_replicas_outlast_a_shared_stall(pg_url: str) -> None:
    """A caller's quota of 2 is full, a slot leased on each replica. A stall no replica
    could beat through makes every heartbeat old: a replica must not free the live
    replicas' slots (its own included) as dead ones and let a third request in."""
    a, b = await _steady_pair(pg_url)
    slots_a, slots_b = a.quota_slots, b.quota_slots
    assert slots_a is not None and slots_b is not None
    try:
        assert await slots_a.take("streams", "ip:10.0.0.1", "on-a", 2)
        assert await slots_b.take("streams", "ip:10.0.0.1", "on-b", 2)
        async with _replicas_stalled(a):
            assert not await slots_b.take("streams", "ip:10.0.0.1", "stalled", 2)
        assert not await slots_b.take("streams", "ip:10.0.0.1", "after", 2)
        assert len(await slots_b.holders("streams", "ip:10.0.0.1")) == 2
    finally:
        await b.aclose()
        await a.aclose()
