"""The SDK behaviour ``apcore_a2a/upstream/untaken_follow_ups.py`` answers: a follow-up queued
for a parked task's run, that a ``CancelTask`` beats to the run, is answered on a plain
``DefaultRequestHandler`` with the canceled task (a stream: its ``CANCELED`` status) while
no history holds the message. A failure of ``test_the_sdk_...`` means the SDK refuses such
a follow-up itself now: delete that file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
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
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a.upstream.untaken_follow_ups import refuse_untaken
from tests.client._sdk_agent import agent_card

CANCELED = TaskState.TASK_STATE_CANCELED


class _Parks(AgentExecutor):
    """Asks for input (the run stays parked for the next message); a cancel cancels."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        state = TaskState.TASK_STATE_INPUT_REQUIRED
        task = new_task(context.task_id, context.context_id, state, history=[context.message])
        await event_queue.enqueue_event(task)

    async def cancel(self, context: Any, event_queue: Any) -> None:
        status = TaskStatus(state=CANCELED)
        ids = {"task_id": context.task_id, "context_id": context.context_id}
        await event_queue.enqueue_event(TaskStatusUpdateEvent(**ids, status=status))


class _Taken(asyncio.Lock):
    """The run's request lock, held by the test: ``taken`` is set once the run has taken a
    request off its queue and waits for the lock to start it."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = asyncio.Event()

    async def acquire(self) -> bool:
        if self.locked():
            self.taken.set()
        return await super().acquire()


async def _first_request_done(run: Any) -> None:
    """Until the run's consumer has released the request lock of the parking request."""
    while run._request_lock.locked():
        await asyncio.sleep(0)


def _message(text: str, task_id: str = "") -> SendMessageRequest:
    message = Message(message_id=text, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    return SendMessageRequest(message=message)


async def _beaten_follow_up(streaming: bool) -> tuple[object, Task | None, InMemoryTaskStore]:
    """A follow-up queued for a parked task, then the task canceled before its run takes the
    follow-up: the follow-up's answer (a stream: its first event) and the stored task."""
    store = InMemoryTaskStore()
    handler = DefaultRequestHandler(
        agent_executor=_Parks(), task_store=store, agent_card=agent_card("http://x")
    )
    try:
        parked = await handler.on_message_send(_message("first"), ServerCallContext())
        task_id = str(parked.id)
        run = await handler._active_task_registry.get(task_id)
        assert run is not None
        await asyncio.wait_for(_first_request_done(run), 10)
        lock = run._request_lock = _Taken()
        await lock.acquire()  # the run takes the follow-up off its queue and waits here

        async def follow_up() -> object:
            request, context = _message("second", task_id), ServerCallContext()
            if not streaming:
                return await handler.on_message_send(request, context)
            events = handler.on_message_send_stream(request, context)
            try:
                return await anext(events)
            finally:
                await events.aclose()

        answering = asyncio.ensure_future(follow_up())
        await asyncio.wait_for(lock.taken.wait(), 10)
        await handler.on_cancel_task(CancelTaskRequest(id=task_id), ServerCallContext())
        answer = await asyncio.wait_for(answering, 10)
        return answer, await store.get(task_id, ServerCallContext()), store
    finally:
        await handler.aclose()


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_the_sdk_answers_a_follow_up_a_cancel_beat_as_taken(streaming: bool) -> None:
    answer, stored, _ = await _beaten_follow_up(streaming)
    assert isinstance(answer, TaskStatusUpdateEvent if streaming else Task), answer
    assert answer.status.state == CANCELED
    assert stored is not None and stored.status.state == CANCELED
    assert [m.message_id for m in stored.history] == ["first"]  # "second" is nowhere


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_the_correction_refuses_it_as_for_a_finished_task(streaming: bool) -> None:
    answer, stored, store = await _beaten_follow_up(streaming)
    assert stored is not None
    follow_up = _message("second", stored.id)
    with pytest.raises(UnsupportedOperationError, match="is in terminal state: TASK_STATE_CANC"):
        await refuse_untaken(answer, follow_up, store.get, ServerCallContext())
    # A follow-up the history holds was taken: its answer stands, even when the answer's
    # own history is cut (historyLength).
    taken = _message("first", stored.id)
    await refuse_untaken(answer, taken, store.get, ServerCallContext())
