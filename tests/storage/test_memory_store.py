"""The bounded memory store: capacity, TTL, never evicting live work, SDK semantics."""

from __future__ import annotations

import logging

import pytest
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import ListTasksRequest, TaskState

from apcore_a2a.storage import BoundedMemoryTaskStore, open_stores

from ._helpers import ago, ctx, make_task, settings


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_thirty_thousand_tasks_through_capacity_ten_thousand() -> None:
    store = BoundedMemoryTaskStore(max_capacity=10_000, ttl_seconds=3600)
    owner = ctx("alice")
    active_ids: list[str] = []
    finished_ids: list[str] = []
    for i in range(30_000):
        # Every 10th task stays in flight; the rest finish right after being created.
        task = make_task(TaskState.TASK_STATE_SUBMITTED, task_id=f"t{i}")
        await store.save(task, owner)
        if i % 10 == 0:
            active_ids.append(task.id)
            continue
        task.status.state = TaskState.TASK_STATE_COMPLETED
        await store.save(task, owner)
        finished_ids.append(task.id)
        assert len(store) <= 10_000

    assert len(store) == 10_000
    for task_id in active_ids:
        kept = await store.get(task_id, owner)
        assert kept is not None, f"active task {task_id} was evicted"
        assert kept.status.state == TaskState.TASK_STATE_SUBMITTED
    # What is left of the finished tasks are the most recent ones.
    room_for_finished = 10_000 - len(active_ids)
    assert await store.get(finished_ids[-1], owner) is not None
    assert await store.get(finished_ids[-room_for_finished], owner) is not None
    assert await store.get(finished_ids[-room_for_finished - 1], owner) is None
    assert await store.get(finished_ids[0], owner) is None
    page = await store.list(ListTasksRequest(page_size=1), owner)
    assert page.total_size == 10_000


async def test_expired_finished_tasks_go_first_then_the_oldest_finished() -> None:
    clock = FakeClock()
    store = BoundedMemoryTaskStore(max_capacity=4, ttl_seconds=60, clock=clock)
    old_done = make_task(TaskState.TASK_STATE_COMPLETED)
    await store.save(old_done, ctx())
    clock.now += 30
    done_a = make_task(TaskState.TASK_STATE_FAILED)
    done_b = make_task(TaskState.TASK_STATE_CANCELED)
    running = make_task(TaskState.TASK_STATE_WORKING)
    for task in (done_a, done_b, running):
        await store.save(task, ctx())
    clock.now += 31  # old_done is now 61 s old: expired; the others are 31 s old

    await store.save(make_task(TaskState.TASK_STATE_SUBMITTED), ctx())
    assert await store.get(old_done.id, ctx()) is None
    assert await store.get(done_a.id, ctx()) is not None
    assert len(store) == 4

    await store.save(make_task(TaskState.TASK_STATE_SUBMITTED), ctx())
    assert await store.get(done_a.id, ctx()) is None  # oldest finished, not expired
    assert await store.get(done_b.id, ctx()) is not None
    assert await store.get(running.id, ctx()) is not None
    assert len(store) == 4


async def test_expired_finished_tasks_are_dropped_even_below_capacity() -> None:
    clock = FakeClock()
    store = BoundedMemoryTaskStore(max_capacity=100, ttl_seconds=10, clock=clock)
    done = make_task(TaskState.TASK_STATE_COMPLETED)
    idle = make_task(TaskState.TASK_STATE_INPUT_REQUIRED)
    await store.save(done, ctx())
    await store.save(idle, ctx())
    clock.now += 11
    await store.save(make_task(TaskState.TASK_STATE_WORKING), ctx())
    assert await store.get(done.id, ctx()) is None
    # Waiting for input is not finished: it stays however old it is.
    assert await store.get(idle.id, ctx()) is not None


async def test_a_task_that_finishes_late_is_kept_by_its_last_save() -> None:
    clock = FakeClock()
    store = BoundedMemoryTaskStore(max_capacity=10, ttl_seconds=10, clock=clock)
    task = make_task(TaskState.TASK_STATE_WORKING)
    await store.save(task, ctx())
    clock.now += 100
    task.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(task, ctx())
    clock.now += 5
    await store.save(make_task(TaskState.TASK_STATE_WORKING), ctx())
    assert await store.get(task.id, ctx()) is not None


async def test_only_active_tasks_at_capacity_grow_past_it_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = BoundedMemoryTaskStore(max_capacity=3, ttl_seconds=None)
    tasks = [make_task(TaskState.TASK_STATE_WORKING) for _ in range(5)]
    with caplog.at_level(logging.WARNING, logger="apcore_a2a.storage.memory"):
        for task in tasks:
            await store.save(task, ctx())
    assert len(store) == 5
    for task in tasks:
        assert await store.get(task.id, ctx()) is not None
    assert sum("every stored task is still active" in r.message for r in caplog.records) == 1


async def test_updating_an_existing_task_at_capacity_evicts_nothing() -> None:
    store = BoundedMemoryTaskStore(max_capacity=2, ttl_seconds=None)
    a = make_task(TaskState.TASK_STATE_COMPLETED)
    b = make_task(TaskState.TASK_STATE_WORKING)
    await store.save(a, ctx())
    await store.save(b, ctx())
    b.status.state = TaskState.TASK_STATE_COMPLETED
    await store.save(b, ctx())
    assert await store.get(a.id, ctx()) is not None
    assert len(store) == 2


async def test_eviction_only_touches_the_evicted_owners_task() -> None:
    store = BoundedMemoryTaskStore(max_capacity=2, ttl_seconds=None)
    shared_id = "same-id"
    alice_task = make_task(TaskState.TASK_STATE_COMPLETED, task_id=shared_id, text="alice")
    bob_task = make_task(TaskState.TASK_STATE_COMPLETED, task_id=shared_id, text="bob")
    await store.save(alice_task, ctx("alice"))
    await store.save(bob_task, ctx("bob"))
    await store.save(make_task(TaskState.TASK_STATE_WORKING), ctx("carol"))
    assert await store.get(shared_id, ctx("alice")) is None  # oldest finished
    kept = await store.get(shared_id, ctx("bob"))
    assert kept is not None
    assert kept.history[0].parts[0].text == "bob"


async def test_the_owner_holding_most_finished_tasks_gives_one_up() -> None:
    store = BoundedMemoryTaskStore(max_capacity=6, ttl_seconds=None)
    done = TaskState.TASK_STATE_COMPLETED
    alice = [make_task(done) for _ in range(2)]
    bob = [make_task(done) for _ in range(4)]
    for task in alice:
        await store.save(task, ctx("alice"))
    for task in bob:
        await store.save(task, ctx("bob"))
    # Carol's first task, and Alice's next one: Bob holds most (4, then 3 against 2).
    await store.save(make_task(done), ctx("carol"))
    assert await store.get(bob[0].id, ctx("bob")) is None
    await store.save(make_task(done), ctx("alice"))
    assert {await store.get(t.id, ctx("alice")) is None for t in alice} == {False}
    assert await store.get(bob[1].id, ctx("bob")) is None
    await store.save(make_task(done), ctx("alice"))  # Alice 3, Bob 2: Alice gives one up
    assert await store.get(alice[0].id, ctx("alice")) is None
    assert await store.get(bob[2].id, ctx("bob")) is not None
    assert len(store) == 6


async def test_delete_frees_capacity() -> None:
    store = BoundedMemoryTaskStore(max_capacity=2, ttl_seconds=None)
    a = make_task(TaskState.TASK_STATE_WORKING)
    b = make_task(TaskState.TASK_STATE_WORKING)
    await store.save(a, ctx())
    await store.save(b, ctx())
    await store.delete(a.id, ctx())
    assert len(store) == 1
    await store.delete(a.id, ctx("bob"))  # unknown for bob: nothing happens
    assert len(store) == 1


async def test_listing_matches_the_sdk_store() -> None:
    ours = BoundedMemoryTaskStore(max_capacity=1000)
    sdk = InMemoryTaskStore()
    tasks = [
        make_task(
            TaskState.TASK_STATE_COMPLETED if i % 3 else TaskState.TASK_STATE_WORKING,
            context_id="ctx-a" if i % 2 else "ctx-b",
            at=ago(i % 7),  # repeated timestamps exercise the id tie-break
        )
        for i in range(40)
    ]
    for task in tasks:
        await ours.save(task, ctx())
        await sdk.save(task, ctx())
    requests = [
        ListTasksRequest(page_size=6),
        ListTasksRequest(context_id="ctx-a", page_size=4),
        ListTasksRequest(status=TaskState.TASK_STATE_WORKING),
    ]
    for request in requests:
        token = ""
        while True:
            request.page_token = token
            a = await ours.list(request, ctx())
            b = await sdk.list(request, ctx())
            assert a == b
            token = a.next_page_token
            if not token:
                break


@pytest.mark.parametrize("capacity", [0, -5])
def test_capacity_must_be_positive(capacity: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        BoundedMemoryTaskStore(max_capacity=capacity)


def test_capacity_must_be_an_integer() -> None:
    with pytest.raises(TypeError):
        BoundedMemoryTaskStore(max_capacity=2.5)  # type: ignore[arg-type]


async def test_open_stores_applies_capacity_and_ttl_settings() -> None:
    stores = open_stores("memory://", settings(task_max_capacity=2, task_ttl_seconds=0))
    store = stores.task_store.inner  # type: ignore[union-attr]
    assert isinstance(store, BoundedMemoryTaskStore)
    assert store.max_capacity == 2
    first = make_task(TaskState.TASK_STATE_COMPLETED)
    await store.save(first, ctx())
    for _ in range(3):
        await store.save(make_task(TaskState.TASK_STATE_COMPLETED), ctx())
    assert len(store) == 2
    assert await store.get(first.id, ctx()) is None
