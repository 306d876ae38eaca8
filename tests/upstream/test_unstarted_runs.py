"""The SDK behaviours ``apcore_a2a/upstream/unstarted_runs.py`` answers, on a plain
``DefaultRequestHandler``: a message for a finished task, refused by the ``ActiveTask`` the
registry built for it (its start reads the finished task), leaves that task's two queue
dispatchers waiting for ever; a message whose request is cancelled while its run's start
reads the store leaves that run registered, never started, and the next message for the
task is handed it; a subscribe handed that run while its start reads waits for ever once
the start is cancelled. A failure of the three ``test_the_sdk_...`` means the SDK closes
such runs now: delete that file."""

from __future__ import annotations

import asyncio

import pytest
from a2a.helpers.proto_helpers import new_task
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a.upstream.unstarted_runs import close_unstarted_runs
from tests._sdk import StallingStore
from tests.client._sdk_agent import EchoExecutor, agent_card


def _dispatchers() -> set[asyncio.Task[object]]:
    """The event queues' dispatchers still running."""
    return {t for t in asyncio.all_tasks() if "_dispatch_loop" in repr(t.get_coro())}


def _message(n: int) -> SendMessageRequest:
    message = Message(message_id=f"m{n}", role=Role.ROLE_USER, parts=[Part(text="x")])
    message.task_id, message.context_id = "t", "c"
    return SendMessageRequest(message=message)


async def _refused_follow_ups(corrected: bool) -> set[asyncio.Task[object]]:
    """Three messages for a canceled task, each refused: the dispatchers left running."""
    store = InMemoryTaskStore()
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=agent_card("http://x")
    )
    if corrected:
        close_unstarted_runs(handler)
    canceled = new_task("t", "c", TaskState.TASK_STATE_CANCELED, history=[])
    await store.save(canceled, ServerCallContext())
    before = _dispatchers()
    try:
        for n in range(3):
            with pytest.raises(UnsupportedOperationError, match="terminal state"):
                await handler.on_message_send(_message(n), ServerCallContext())
        left = _dispatchers() - before
        if left:
            await asyncio.wait(left, timeout=1)  # a cancelled dispatcher ends in a loop turn
        return {t for t in left if not t.done()}
    finally:
        await handler.aclose()
        for task in _dispatchers() - before:
            task.cancel()


async def test_the_sdk_leaves_the_dispatchers_of_a_refused_start_running() -> None:
    assert len(await _refused_follow_ups(corrected=False)) == 6  # two per refused message


async def test_the_correction_closes_them() -> None:
    assert await _refused_follow_ups(corrected=True) == set()


async def _after_a_cancelled_start(corrected: bool) -> Task | Message | None:
    """A follow-up for a parked task whose run is not registered (a new process) is cancelled
    while the run's start reads the task; then the next follow-up: its answer, or ``None``
    if it was handed the unstarted run (it would wait for ever)."""
    store = StallingStore()
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=agent_card("http://x")
    )
    if corrected:
        close_unstarted_runs(handler)
    parked = new_task("t", "c", TaskState.TASK_STATE_INPUT_REQUIRED, history=[])
    await store.save(parked, ServerCallContext())
    store.armed = True
    try:
        first = asyncio.ensure_future(handler.on_message_send(_message(0), ServerCallContext()))
        await store.stalled.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        run = await handler._active_task_registry.get("t")
        if run is not None and not run.is_finished:
            return None
        # A hang guard only: the answer comes in a few loop turns.
        return await asyncio.wait_for(
            handler.on_message_send(_message(1), ServerCallContext()), timeout=30
        )
    finally:
        await handler.aclose()


async def test_the_sdk_keeps_a_run_whose_start_was_cancelled() -> None:
    assert await _after_a_cancelled_start(corrected=False) is None


async def test_the_correction_forgets_it_and_the_next_message_is_answered() -> None:
    answer = await _after_a_cancelled_start(corrected=True)
    assert isinstance(answer, Task), answer
    assert answer.id == "t"
    assert [m.message_id for m in answer.history] == ["m1"]


async def _subscribed_as_a_start_is_cancelled(corrected: bool) -> list[str] | None:
    """A subscribe to a parked task whose run (a new process has none) a follow-up's start
    is reading, that follow-up then cancelled: what the subscriber gets, the next follow-up
    answered (``None``: it waited for ever)."""
    store = StallingStore()
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=agent_card("http://x")
    )
    if corrected:
        close_unstarted_runs(handler)
    parked = new_task("t", "c", TaskState.TASK_STATE_INPUT_REQUIRED, history=[])
    await store.save(parked, ServerCallContext())
    store.armed = True
    events = handler.on_subscribe_to_task(SubscribeToTaskRequest(id="t"), ServerCallContext())
    try:
        first = asyncio.ensure_future(handler.on_message_send(_message(0), ServerCallContext()))
        await store.stalled.wait()
        subscribed = asyncio.ensure_future(anext(events))
        await store.handed.wait()  # the subscriber was handed the run being started
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        # Hang guards only: each answer comes in a few loop turns.
        try:
            seen = [await asyncio.wait_for(subscribed, timeout=5)]
        except TimeoutError:
            return None
        following = asyncio.ensure_future(anext(events))
        await asyncio.wait_for(handler.on_message_send(_message(1), ServerCallContext()), 30)
        seen.append(await asyncio.wait_for(following, timeout=30))
        return [type(event).__name__ for event in seen]
    finally:
        await events.aclose()
        await handler.aclose()


async def test_the_sdk_leaves_a_subscriber_handed_a_run_whose_start_was_cancelled_waiting() -> None:
    assert await _subscribed_as_a_start_is_cancelled(corrected=False) is None


async def test_the_correction_starts_a_run_for_it_and_it_sees_the_next_message() -> None:
    seen = await _subscribed_as_a_start_is_cancelled(corrected=True)
    assert seen is not None and seen[0] == "Task", seen
    assert len(seen) == 2  # the next message's first event reached it
