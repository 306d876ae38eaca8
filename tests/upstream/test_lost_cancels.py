"""The SDK behaviour ``apcore_a2a/upstream/lost_cancels.py`` answers: a cancel of a running
task whose run finishes as the cancel reaches it answers success with the finished task on a
plain ``DefaultRequestHandler``. A failure here means the SDK refuses it now: delete that
file."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError

from apcore_a2a.upstream.lost_cancels import refuse_lost_cancels
from tests.client._sdk_agent import agent_card


class _Finishes(AgentExecutor):
    """Works until a cancel reaches it, then ends with its result (a result on its way)."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        state = TaskState.TASK_STATE_WORKING
        task = new_task(context.task_id, context.context_id, state, history=[context.message])
        await event_queue.enqueue_event(task)
        await asyncio.Event().wait()

    async def cancel(self, context: Any, event_queue: Any) -> None:
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
            )
        )


async def _cancel(refuse: bool) -> object:
    """What a cancel of a task that finishes as it is canceled answers."""
    handler = DefaultRequestHandler(
        agent_executor=_Finishes(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card("http://x"),
    )
    if refuse:
        refuse_lost_cancels(handler)
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")])
    request = SendMessageRequest(message=message)
    request.configuration.return_immediately = True
    try:
        task = await handler.on_message_send(request, ServerCallContext())
        try:
            return await handler.on_cancel_task(CancelTaskRequest(id=task.id), ServerCallContext())
        except TaskNotCancelableError as refused:
            return refused
    finally:
        await handler.aclose()


async def test_the_sdk_answers_a_cancel_with_the_completed_task() -> None:
    answer = await _cancel(refuse=False)
    assert not isinstance(answer, TaskNotCancelableError), answer
    assert answer.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]


async def test_refused_it_is_not_cancelable() -> None:
    answer = await _cancel(refuse=True)
    assert isinstance(answer, TaskNotCancelableError), answer
    assert "TASK_STATE_COMPLETED" in str(answer)
