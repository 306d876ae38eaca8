"""The SDK behaviour ``apcore_a2a/upstream/unstarted_runs.py`` answers: a message for a
finished task, refused by the ``ActiveTask`` the registry built for it (its start reads the
finished task), leaves that task's two queue dispatchers waiting for ever on a plain
``DefaultRequestHandler``. A failure of ``test_the_sdk_...`` means the SDK closes them now:
delete that file."""

from __future__ import annotations

import asyncio

import pytest
from a2a.helpers.proto_helpers import new_task
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a.upstream.unstarted_runs import close_unstarted_runs
from tests.client._sdk_agent import EchoExecutor, agent_card


def _dispatchers() -> set[asyncio.Task[object]]:
    """The event queues' dispatchers still running."""
    return {t for t in asyncio.all_tasks() if "_dispatch_loop" in repr(t.get_coro())}


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
            message = Message(message_id=f"m{n}", role=Role.ROLE_USER, parts=[Part(text="x")])
            message.task_id = "t"
            with pytest.raises(UnsupportedOperationError, match="terminal state"):
                await handler.on_message_send(
                    SendMessageRequest(message=message), ServerCallContext()
                )
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
