"""One store contract, run against memory, SQLite and PostgreSQL (plain and cluster)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from a2a.server.cluster import StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.types import (
    ListTasksRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)

from apcore_a2a.edge.call import record_of
from apcore_a2a.storage import Stores, open_stores

from ._helpers import ago, ctx, make_task, settings

_VARIANTS = ["memory", "sqlite", "sqlite-cluster", "postgresql", "postgresql-cluster"]


@pytest.fixture(params=_VARIANTS)
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    backend, _, mode = str(request.param).partition("-")
    url = {
        "memory": lambda: "memory://",
        "sqlite": lambda: request.getfixturevalue("sqlite_url"),
        "postgresql": lambda: request.getfixturevalue("pg_url"),
    }[backend]()
    s = open_stores(url, settings(cluster=mode == "cluster", cluster_poll_interval=0.05))
    await s.start()
    try:
        yield s
    finally:
        await s.aclose()


async def save(stores: Stores, task: Task, user: str | None = "alice") -> None:
    """Save through whichever interface the store has (versioned in cluster mode)."""
    store = stores.task_store
    if isinstance(store, VersionedTaskStore):
        found = await store.get(task.id, ctx(user))
        prev = found.version if found else TaskVersion.MISSING
        await store.save(task, event=None, prev=None, prev_version=prev, context=ctx(user))
    else:
        await store.save(task, ctx(user))


def _in_state(task: Task, state: TaskState) -> Task:
    """A copy of *task* in *state*."""
    copy = Task()
    copy.CopyFrom(task)
    copy.status.state = state
    return copy


async def list_tasks(stores: Stores, user: str | None = "alice", **params: object) -> list[str]:
    page = await stores.task_store.list(ListTasksRequest(**params), ctx(user))  # type: ignore[arg-type]
    return [t.id for t in page.tasks]


async def test_round_trip_keeps_every_field(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_COMPLETED, text="round trip")
    await save(stores, task)
    got = await stores.get_task(task.id, ctx())
    assert got == task
    assert got is not task


async def test_missing_task_is_none(stores: Stores) -> None:
    assert await stores.get_task(str(uuid.uuid4()), ctx()) is None


async def test_update_replaces_the_task(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    await save(stores, task)
    task.status.state = TaskState.TASK_STATE_COMPLETED
    task.artifacts[0].parts[0].text = "changed"
    await save(stores, task)
    got = await stores.get_task(task.id, ctx())
    assert got is not None
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert got.artifacts[0].parts[0].text == "changed"


async def test_mutating_a_returned_task_does_not_change_the_store(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    await save(stores, task)
    got = await stores.get_task(task.id, ctx())
    assert got is not None
    got.status.state = TaskState.TASK_STATE_FAILED
    again = await stores.get_task(task.id, ctx())
    assert again is not None
    assert again.status.state == TaskState.TASK_STATE_WORKING


async def test_a_finished_task_is_final(stores: Stores) -> None:
    """A save over a task stored in a terminal state is refused as a concurrent
    modification (a2a-sdk 1.3 saves an agent's queued result after a cancel won)."""
    task = make_task(TaskState.TASK_STATE_WORKING)
    await save(stores, task)
    await save(stores, _in_state(task, TaskState.TASK_STATE_CANCELED))
    with pytest.raises(ConcurrentTaskModificationError):
        await save(stores, _in_state(task, TaskState.TASK_STATE_COMPLETED))
    stored = await stores.get_task(task.id, ctx())
    assert stored is not None and stored.status.state == TaskState.TASK_STATE_CANCELED


async def test_tasks_are_scoped_to_their_owner(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_COMPLETED)
    await save(stores, task, "alice")
    assert await stores.get_task(task.id, ctx("bob")) is None
    assert await stores.get_task(task.id, ctx(None)) is None
    assert await list_tasks(stores, "bob") == []
    bob_page = await stores.task_store.list(ListTasksRequest(), ctx("bob"))
    assert bob_page.total_size == 0
    await stores.task_store.delete(task.id, ctx("bob"))
    assert await stores.get_task(task.id, ctx("alice")) is not None


async def test_anonymous_callers_share_one_bucket(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_COMPLETED)
    await save(stores, task, None)
    assert await stores.get_task(task.id, ctx(None)) is not None
    assert await stores.get_task(task.id, ctx("alice")) is None


async def test_delete(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_COMPLETED)
    await save(stores, task)
    await stores.task_store.delete(task.id, ctx())
    assert await stores.get_task(task.id, ctx()) is None
    await stores.task_store.delete(task.id, ctx())  # deleting again is not an error


async def test_list_is_newest_first_and_pages_with_a_cursor(stores: Stores) -> None:
    tasks = [make_task(TaskState.TASK_STATE_COMPLETED, at=ago(100 - i)) for i in range(7)]
    for task in reversed(tasks):  # insertion order must not matter
        await save(stores, task)
    expected = [t.id for t in reversed(tasks)]

    first = await stores.task_store.list(ListTasksRequest(page_size=3), ctx())
    assert [t.id for t in first.tasks] == expected[:3]
    assert first.total_size == 7
    assert first.page_size == 3
    assert first.next_page_token
    second = await stores.task_store.list(
        ListTasksRequest(page_size=3, page_token=first.next_page_token), ctx()
    )
    assert [t.id for t in second.tasks] == expected[3:6]
    third = await stores.task_store.list(
        ListTasksRequest(page_size=3, page_token=second.next_page_token), ctx()
    )
    assert [t.id for t in third.tasks] == expected[6:]
    assert not third.next_page_token


async def test_list_filters_by_context_and_state(stores: Stores) -> None:
    context_id = str(uuid.uuid4())
    a = make_task(TaskState.TASK_STATE_COMPLETED, context_id=context_id, at=ago(3))
    b = make_task(TaskState.TASK_STATE_FAILED, context_id=context_id, at=ago(2))
    c = make_task(TaskState.TASK_STATE_COMPLETED, at=ago(1))
    for task in (a, b, c):
        await save(stores, task)
    assert await list_tasks(stores, context_id=context_id) == [b.id, a.id]
    assert await list_tasks(stores, status=TaskState.TASK_STATE_COMPLETED) == [c.id, a.id]


async def test_push_configs_are_owner_scoped(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    await save(stores, task)
    push = stores.push_config_store
    config = TaskPushNotificationConfig(
        task_id=task.id, id="cfg-1", url="https://example.com/hook", token="t0k"
    )
    await push.set_info(task.id, config, ctx("alice"))
    mine = await push.get_info(task.id, ctx("alice"))
    assert [(c.id, c.url, c.token) for c in mine] == [("cfg-1", "https://example.com/hook", "t0k")]
    assert await push.get_info(task.id, ctx("bob")) == []
    await push.delete_info(task.id, ctx("bob"), "cfg-1")
    assert len(await push.get_info(task.id, ctx("alice"))) == 1
    await push.delete_info(task.id, ctx("alice"), "cfg-1")
    assert await push.get_info(task.id, ctx("alice")) == []


async def test_ping_succeeds_while_reachable(stores: Stores) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    await save(stores, task)
    # concurrent probes all answer (None: healthy) and a probe changes nothing
    assert await asyncio.gather(*(stores.ping() for _ in range(5))) == [None] * 5
    assert await stores.get_task(task.id, ctx()) == task


async def test_start_and_aclose_are_idempotent(store_url: str) -> None:
    s = open_stores(store_url, settings())
    await s.start()
    running = make_task(TaskState.TASK_STATE_WORKING)
    await save(s, running)
    # A second start is a no-op: it must not run the restart recovery again, which
    # would fail this process's own running task as "interrupted".
    await s.start()
    assert await s.get_task(running.id, ctx("alice")) == running
    await s.aclose()
    assert await s.aclose() is None  # closing twice is harmless


async def test_cluster_store_rejects_a_stale_version(sql_url: str) -> None:
    s = open_stores(sql_url, settings(cluster=True))
    await s.start()
    try:
        store = s.task_store
        assert isinstance(store, VersionedTaskStore)
        assert s.event_stream is not None
        task = make_task(TaskState.TASK_STATE_WORKING)
        v1 = await store.save(
            task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=ctx()
        )
        event = TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status
        )
        v2 = await store.save(task, event=event, prev=task, prev_version=v1, context=ctx())
        assert v2.is_after(v1)
        with pytest.raises(ConcurrentTaskModificationError):
            await store.save(task, event=None, prev=task, prev_version=v1, context=ctx())
        stored = await store.get(task.id, ctx())
        assert isinstance(stored, StoredTask)
        assert stored.version == v2
        # The event log carries the event for other replicas to replay.
        stream = s.event_stream.subscribe(task.id, after=v1)
        replayed = await anext(stream)
        await stream.aclose()
        assert replayed.version == v2
        assert replayed.event == event
    finally:
        await s.aclose()


async def test_a_refused_save_ends_the_reads_a_request_kept(sql_url: str) -> None:
    """A request's reads are kept for a second, but a save refused as a concurrent
    modification proves them stale: the SDK's re-read after it (ActiveTask, sometimes
    through a cancel's context) sees the other replica's write, not the kept copy."""
    a, b = (
        open_stores(sql_url, settings(cluster=True)),
        open_stores(sql_url, settings(cluster=True)),
    )
    await a.start()
    await b.start()
    try:
        store_a, store_b = a.task_store, b.task_store
        assert isinstance(store_a, VersionedTaskStore)
        assert isinstance(store_b, VersionedTaskStore)
        task = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
        v1 = await store_a.save(
            task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=ctx()
        )
        request = ctx()
        record_of(request)  # a request of our edge: it keeps its reads
        kept = await store_a.get(task.id, request)
        assert kept is not None and kept.version == v1
        canceled = _in_state(task, TaskState.TASK_STATE_CANCELED)
        v2 = await store_b.save(canceled, event=None, prev=task, prev_version=v1, context=ctx())
        working = _in_state(task, TaskState.TASK_STATE_WORKING)
        with pytest.raises(ConcurrentTaskModificationError):
            await store_a.save(working, event=None, prev=task, prev_version=v1, context=ctx())
        again = await store_a.get(task.id, request)
        assert again is not None and again.version == v2
        assert again.task.status.state == TaskState.TASK_STATE_CANCELED
        # With the current version too: the other replica's cancel is final.
        with pytest.raises(ConcurrentTaskModificationError):
            await store_a.save(working, event=None, prev=task, prev_version=v2, context=request)
    finally:
        await a.aclose()
        await b.aclose()


async def test_replicas_starting_together_on_an_empty_database_both_come_up(
    sql_url: str,
) -> None:
    replicas = [open_stores(sql_url, settings(cluster=True)) for _ in range(3)]
    try:
        await asyncio.gather(*(r.start() for r in replicas))
        task = make_task(TaskState.TASK_STATE_COMPLETED)
        await save(replicas[0], task)
        for r in replicas:
            assert await r.get_task(task.id, ctx()) == task
    finally:
        await asyncio.gather(*(r.aclose() for r in replicas))


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_saves_of_tasks_in_turn_name_the_event_ids_the_log_holds(
    sql_url: str, cluster: bool
) -> None:
    """A save of a stored task inserts its event and names its id to the stream sending
    it; interleaved tasks, the id is the one the log replays, and a stale save leaves
    neither its event nor its task behind."""
    s = open_stores(sql_url, settings(cluster=cluster))
    await s.start()
    try:
        store, log = s.task_store, s.event_stream
        assert isinstance(store, VersionedTaskStore)
        assert log is not None
        tasks = [make_task(TaskState.TASK_STATE_WORKING) for _ in range(2)]
        versions = {}
        for task in tasks:
            versions[task.id] = [
                await store.save(
                    task, event=None, prev=None, prev_version=TaskVersion.MISSING, context=ctx()
                )
            ]
        for n in range(3):
            for task in tasks:
                task.status.message.message_id = f"m{n}"
                event = TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )
                prev = versions[task.id][-1]
                version = await store.save(
                    task, event=event, prev=task, prev_version=prev, context=ctx()
                )
                versions[task.id].append(version)
        named = {
            task.id: [await log.seq_at(task.id, v) for v in versions[task.id][1:]] for task in tasks
        }
        stale = Task()
        stale.CopyFrom(tasks[0])
        stale.status.message.message_id = "stale"
        with pytest.raises(ConcurrentTaskModificationError):
            await store.save(
                stale,
                event=TaskStatusUpdateEvent(task_id=stale.id, context_id=stale.context_id),
                prev=stale,
                prev_version=versions[stale.id][1],
                context=ctx(),
            )
        for task in tasks:
            replayed = [
                (seq, version)
                async for seq, version, _event in log.tail(task.id, 0, until_idle=True)
            ]
            assert replayed == list(zip(named[task.id], versions[task.id][1:], strict=True))
            # read again (nothing noted now), the ids are the same
            assert [await log.seq_at(task.id, v) for v in versions[task.id][1:]] == named[task.id]
            assert await s.get_task(task.id, ctx()) == task
    finally:
        await s.aclose()


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_a_stale_save_among_concurrent_ones_refuses_only_itself(
    sql_url: str, cluster: bool
) -> None:
    """Saves of several stored tasks at once (one transaction may take them together):
    the one with a stale version is refused, every other is stored with its event."""
    s = open_stores(sql_url, settings(cluster=cluster))
    await s.start()
    try:
        store, log = s.task_store, s.event_stream
        assert isinstance(store, VersionedTaskStore)
        assert log is not None
        tasks = [make_task(TaskState.TASK_STATE_WORKING) for _ in range(6)]
        firsts = [
            await store.save(
                t, event=None, prev=None, prev_version=TaskVersion.MISSING, context=ctx()
            )
            for t in tasks
        ]
        stale = tasks[2]
        await store.save(stale, event=None, prev=stale, prev_version=firsts[2], context=ctx())

        async def step(task: Task, prev: TaskVersion) -> TaskVersion:
            task.status.message.message_id = "next"
            event = TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            return await store.save(task, event=event, prev=task, prev_version=prev, context=ctx())

        outcomes = await asyncio.gather(
            *(step(t, v) for t, v in zip(tasks, firsts, strict=True)), return_exceptions=True
        )
        assert isinstance(outcomes[2], ConcurrentTaskModificationError)
        for task, outcome in zip(tasks, outcomes, strict=True):
            if task is stale:
                stored = await store.get(task.id, ctx())
                assert stored is not None and stored.task.status.message.message_id != "next"
                assert [e async for e in log.tail(task.id, 0, until_idle=True)] == []
                continue
            assert isinstance(outcome, TaskVersion)
            assert await s.get_task(task.id, ctx()) == task
            replayed = [
                (await log.seq_at(task.id, outcome), outcome),
                *[(seq, v) async for seq, v, _e in log.tail(task.id, 0, until_idle=True)],
            ]
            assert replayed[0] == replayed[1] and len(replayed) == 2
    finally:
        await s.aclose()
