"""The SDK behaviour ``apcore_a2a/upstream/untaken_follow_ups.py`` answers with
:func:`finished_refusal`: a message that reaches a task's run after the run shut its request
queue, but before it is marked finished (the producer's ``finally`` runs first), raises
``QueueShutDown`` out of ``on_message_send``. A failure here means the SDK refuses it with
its own error now: delete that refusal."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a.upstream.untaken_follow_ups import FINISHED_RUN, finished_refusal
from tests.client._sdk_agent import agent_card


class _Parks(AgentExecutor):
    """Asks for input: the task's run stays parked, waiting for the next message."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        state = TaskState.TASK_STATE_INPUT_REQUIRED
        task = new_task(context.task_id, context.context_id, state, history=[context.message])
        await event_queue.enqueue_event(task)

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


def _message(text: str, task_id: str = "") -> SendMessageRequest:
    message = Message(message_id=text, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


async def _finishing_run(handler: DefaultRequestHandler) -> str:
    """A parked task whose run has shut its request queue and is not yet finished."""
    parked = await handler.on_message_send(_message("first"), ServerCallContext())
    task_id = str(parked.id)
    run = await handler._active_task_registry.get(task_id)
    assert run is not None and not run._is_finished.is_set()
    run._request_queue.shutdown(immediate=True)  # what the producer's finally does first
    return task_id


async def test_a_message_meeting_a_finishing_run_raises_what_the_correction_catches() -> None:
    handler = DefaultRequestHandler(
        agent_executor=_Parks(), task_store=InMemoryTaskStore(), agent_card=agent_card("http://x")
    )
    try:
        task_id = await _finishing_run(handler)
        with pytest.raises(FINISHED_RUN):  # QueueShutDown, an internal error on the wire
            await handler.on_message_send(_message("second", task_id), ServerCallContext())
    finally:
        await handler.aclose()
    # What the correction answers instead: the SDK's refusal of a finished run.
    refusal = finished_refusal(task_id)
    assert isinstance(refusal, UnsupportedOperationError)
    assert refusal.message == f"Task {task_id} is already completed."
