"""The SDK behaviour ``apcore_a2a/upstream/unstarted_runs.py`` answers: a message for a task
finished in the store gets a run set up for it whose start fails, and its queues' dispatcher
tasks stay pending on a plain ``DefaultRequestHandler``. A failure of
``test_the_sdk_...`` means the SDK closes such a run now: delete that file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_task
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a.upstream.unstarted_runs import close_unstarted_runs
from tests.client._sdk_agent import EchoExecutor, agent_card


def _pending() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if not t.done() and t is not asyncio.current_task()}


async def _left_by_a_message_for_a_finished_task(corrected: bool) -> set[asyncio.Task[Any]]:
    """The tasks still pending, a few loop turns after the SDK refused such a message."""
    store = InMemoryTaskStore()
    context = ServerCallContext()
    await store.save(new_task("t-1", "c-1", TaskState.TASK_STATE_COMPLETED), context)
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=store, agent_card=agent_card("http://x")
    )
    if corrected:
        close_unstarted_runs(handler)
    before = _pending()
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hi")], task_id="t-1")
    try:
        with pytest.raises(UnsupportedOperationError, match="terminal state"):
            await handler.on_message_send(SendMessageRequest(message=message), context)
        for _ in range(20):
            await asyncio.sleep(0)
        return _pending() - before
    finally:
        await handler.aclose()


async def test_the_sdk_leaves_an_unstarted_runs_queues_pending() -> None:
    left = await _left_by_a_message_for_a_finished_task(corrected=False)
    try:
        names = sorted(t.get_coro().__qualname__ for t in left)  # type: ignore[union-attr]
        assert names == ["EventQueueSource._dispatch_loop"] * 2, left
    finally:
        for task in left:  # what the correction does, so this test leaves nothing behind
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)


async def test_the_correction_closes_them() -> None:
    assert await _left_by_a_message_for_a_finished_task(corrected=True) == set()
