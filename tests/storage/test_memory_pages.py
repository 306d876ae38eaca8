"""``ListTasks`` of the memory store: the SDK's pages, order, ``totalSize`` and tokens,
through saves, updates and deletes between pages, at the cost of the page.

The SDK's ``InMemoryTaskStore`` is the oracle: both stores get the same tasks and the same
changes, and every page of every filter must be the same message (or the same error).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import ListTasksRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import encode_page_token

from apcore_a2a.storage import BoundedMemoryTaskStore

from ._helpers import ctx, make_task

WORKING, DONE = TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED
START = datetime(2026, 1, 1, tzinfo=UTC)


def _task(i: int, owner_share: int = 0) -> Task:
    """Task *i*: one context in three, one state in four, timestamps repeated in pairs
    (the id breaks the tie), one in eleven without a timestamp."""
    task = make_task(
        WORKING if i % 4 == 0 else DONE,
        task_id=f"t{owner_share}-{i:04d}",
        context_id=f"ctx-{i % 3}",
        at=START - timedelta(seconds=i // 2),
    )
    if i % 11 == 0:
        task.status.ClearField("timestamp")
    return task


class Both:
    """The memory store and the SDK's, given the same calls."""

    def __init__(self) -> None:
        self.ours = BoundedMemoryTaskStore(max_capacity=100_000, ttl_seconds=None)
        self.sdk = InMemoryTaskStore()

    async def save(self, task: Task, user: str = "alice") -> None:
        await self.ours.save(task, ctx(user))
        await self.sdk.save(task, ctx(user))

    async def delete(self, task_id: str) -> None:
        await self.ours.delete(task_id, ctx())
        await self.sdk.delete(task_id, ctx())

    async def page(self, request: ListTasksRequest) -> Any:
        """The page both stores answer, asserted equal (an error: its message)."""
        answers = []
        for store in (self.ours, self.sdk):
            try:
                answers.append(await store.list(request, ctx()))
            except InvalidParamsError as exc:
                answers.append(("invalid params", exc.message))
        assert answers[0] == answers[1], request
        return answers[0]


def _requests() -> list[ListTasksRequest]:
    after = ListTasksRequest(page_size=7)
    after.status_timestamp_after.FromDatetime(START - timedelta(seconds=40))
    working_after = ListTasksRequest(status=WORKING, page_size=3)
    working_after.status_timestamp_after.CopyFrom(after.status_timestamp_after)
    return [
        ListTasksRequest(page_size=9),
        ListTasksRequest(context_id="ctx-1", page_size=5),
        ListTasksRequest(status=WORKING, page_size=4),
        ListTasksRequest(context_id="ctx-2", status=WORKING, page_size=2),
        ListTasksRequest(context_id="ctx-none"),
        after,
        working_after,
    ]


async def test_every_page_is_the_sdks_through_changes_between_pages() -> None:
    both = Both()
    for i in range(120):
        await both.save(_task(i))
        await both.save(_task(i, owner_share=1), user="bob")
    changes = 0
    for request in _requests():
        token, pages = "", 0
        while True:
            request.page_token = token
            page = await both.page(request)
            assert all(task.id.startswith("t0-") for task in page.tasks), "another caller's"
            pages += 1
            token = page.next_page_token
            if not token:
                break
            # Between pages: a new task (newest), an update that moves one up and changes
            # its state, a delete, and a task of another caller.
            changes += 1
            await both.save(_task(1000 + changes))
            moved = _task(changes * 7 % 120)
            moved.status.state = WORKING if moved.status.state == DONE else DONE
            moved.status.timestamp.FromDatetime(START + timedelta(seconds=changes))
            await both.save(moved)
            await both.delete(f"t0-{(changes * 13 + 5) % 120:04d}")
            await both.save(_task(2000 + changes, owner_share=1), user="bob")
        assert pages > 1 or request.context_id == "ctx-none"


async def test_older_form_tokens_name_a_listed_task_or_are_refused() -> None:
    both = Both()
    for i in range(30):
        await both.save(_task(i))
        await both.save(_task(i, owner_share=1), user="bob")
    working = ListTasksRequest(status=WORKING, page_size=3)
    for task_id in ("t0-0008", "t0-0011", "t0-0009", "t1-0008", "nothing"):
        for request in (ListTasksRequest(page_size=4), working):
            request.page_token = encode_page_token(task_id)
            await both.page(request)
    request = ListTasksRequest(page_token=encode_page_token("t0-0009"), status=WORKING)
    with pytest.raises(InvalidParamsError):  # listed, but not among the working ones
        await both.ours.list(request, ctx())
    request.page_token = "%%%not base64%%%"
    with pytest.raises(InvalidParamsError):
        await both.ours.list(request, ctx())


async def _calls(call: Callable[[], Awaitable[Any]]) -> int:
    """Python function calls (and C calls) made by *call*: a count, not a time."""
    calls = 0

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        await call()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("status", [TaskState.TASK_STATE_UNSPECIFIED, WORKING])
async def test_a_page_costs_the_same_at_ten_times_the_tasks(status: TaskState) -> None:
    costs = []
    for n in (300, 3000):
        store = BoundedMemoryTaskStore(max_capacity=100_000, ttl_seconds=None)
        for i in range(n):
            await store.save(_task(i), ctx())
        first = await store.list(ListTasksRequest(page_size=20, status=status), ctx())
        second = ListTasksRequest(page_size=20, status=status, page_token=first.next_page_token)
        costs.append(await _calls(lambda: store.list(second, ctx())))  # noqa: B023
    # The SDK's store sorted every task for each page: ten times the calls.
    assert costs[1] <= costs[0] * 1.2, costs
