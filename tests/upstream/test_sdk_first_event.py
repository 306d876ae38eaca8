"""The SDK behaviour ``apcore_a2a/upstream/sdk_first_event.py`` answers: the event an agent
enqueues reaches a streaming subscriber only after several event-loop turns. A failure
here means the SDK delivers in one turn now (delete that file) or needs more turns than
it yields (raise ``FIRST_EVENT_TURNS``)."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from apcore_a2a.upstream.sdk_first_event import FIRST_EVENT_TURNS
from tests.client._sdk_agent import agent_card


class _CountingTurns(AgentExecutor):
    """Enqueues the submitted Task, then counts loop turns until the stream has it."""

    def __init__(self) -> None:
        self.delivered = asyncio.Event()
        self.turns = 0

    async def execute(self, context: Any, event_queue: Any) -> None:
        state = TaskState.TASK_STATE_SUBMITTED
        task = new_task(context.task_id, context.context_id, state, history=[context.message])
        await event_queue.enqueue_event(task)
        while not self.delivered.is_set() and self.turns < 100:
            await asyncio.sleep(0)
            self.turns += 1
        done = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=done)
        )

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


async def test_the_first_event_takes_several_loop_turns_to_reach_a_stream() -> None:
    agent = _CountingTurns()
    handler = DefaultRequestHandler(
        agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=agent_card("http://x")
    )
    message = Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")])
    try:
        async for _event in handler.on_message_send_stream(
            SendMessageRequest(message=message), ServerCallContext()
        ):
            agent.delivered.set()
    finally:
        await handler.aclose()
    assert 1 < agent.turns <= FIRST_EVENT_TURNS
