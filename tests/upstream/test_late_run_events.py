"""The SDK behaviour ``apcore_a2a/upstream/late_run_events.py`` answers: an event a run
queued after its task's terminal state is still applied by the ``ActiveTask`` consumer (a
late chunk for an artifact the task never got is logged at ERROR); a save refused because
another writer finished the task closes the streams' queue before the run's end reaches it
(two WARNINGs). A failure of a ``test_the_sdk_...`` test means the SDK does it right now:
delete that part of the file."""

from __future__ import annotations

import asyncio
import gc
import logging
import weakref
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.cluster import ConcurrentTaskModificationError, LegacyTaskStoreAdapter
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from apcore_a2a.upstream.late_run_events import drop_late_run_events
from tests.client._sdk_agent import agent_card


class _LateChunk(AgentExecutor):
    """Ends its task canceled, then queues a chunk (what a run racing a cancel does)."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        ids = {"task_id": context.task_id, "context_id": context.context_id}
        state = TaskState.TASK_STATE_WORKING
        await event_queue.enqueue_event(new_task(**ids, state=state, history=[context.message]))
        canceled = TaskStatus(state=TaskState.TASK_STATE_CANCELED)
        await event_queue.enqueue_event(TaskStatusUpdateEvent(**ids, status=canceled))
        chunk = Artifact(artifact_id="late", parts=[Part(text="late")])
        await event_queue.enqueue_event(TaskArtifactUpdateEvent(**ids, artifact=chunk, append=True))

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


async def _late_chunk_meets(handler: DefaultRequestHandler, caplog: Any, word: str) -> bool:
    """Send one message; whether a record containing *word* follows (the consumer's
    handling of the late chunk), within a bounded number of loop turns."""
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")])
    with caplog.at_level(logging.DEBUG):
        await handler.on_message_send(SendMessageRequest(message=message), ServerCallContext())
        for _ in range(1000):
            if any(word in r.getMessage() for r in caplog.records):
                return True
            await asyncio.sleep(0)
    return False


def _handler() -> DefaultRequestHandler:
    return DefaultRequestHandler(
        agent_executor=_LateChunk(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card("http://x"),
    )


async def test_the_sdk_applies_a_chunk_queued_after_the_terminal_state(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = _handler()
    try:
        assert await _late_chunk_meets(handler, caplog, "nonexistent artifact")
    finally:
        await handler.aclose()


async def test_the_correction_drops_it_quietly(caplog: pytest.LogCaptureFixture) -> None:
    handler = _handler()
    drop_late_run_events(handler)
    try:
        assert await _late_chunk_meets(handler, caplog, "late TaskArtifactUpdateEvent is dropped")
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    finally:
        await handler.aclose()


class _CanceledElsewhere(LegacyTaskStoreAdapter):
    """A versioned store where another writer cancels the task right after the run's first
    save: the run's next save is refused as stale, and a read finds the task canceled."""

    def __init__(self) -> None:
        super().__init__(InMemoryTaskStore())

    async def save(self, task: Task, **kwargs: Any) -> Any:
        prev = kwargs["prev"]
        if prev is None:
            return await super().save(task, **kwargs)
        canceled = Task()
        canceled.CopyFrom(prev)
        canceled.status.state = TaskState.TASK_STATE_CANCELED
        await self.store.save(canceled, kwargs["context"])
        raise ConcurrentTaskModificationError(task.id)


class _Working(AgentExecutor):
    """Starts its task, reports progress, returns."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        ids = {"task_id": context.task_id, "context_id": context.context_id}
        state = TaskState.TASK_STATE_WORKING
        await event_queue.enqueue_event(new_task(**ids, state=state, history=[context.message]))
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(**ids, status=TaskStatus(state=state))
        )

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


async def _warnings_of_a_cancel_elsewhere(
    caplog: pytest.LogCaptureFixture, corrected: bool
) -> list[str]:
    """The WARNINGs of a run outrun by a cancel another writer stored, once it ended."""
    store = _CanceledElsewhere()
    handler = DefaultRequestHandler(
        agent_executor=_Working(), task_store=store, agent_card=agent_card("http://x")
    )
    if corrected:
        drop_late_run_events(handler)
    caplog.clear()  # the same note, logged
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")])
    try:
        with caplog.at_level(logging.DEBUG):
            answer = await handler.on_message_send(
                SendMessageRequest(message=message), ServerCallContext()
            )
            assert answer.status.state == TaskState.TASK_STATE_CANCELED, answer
            for _ in range(1000):  # until the run's producer and consumer are gone
                if any(
                    "Consumer[" in r.getMessage() and "Finishing" in r.getMessage()
                    for r in caplog.records
                ):
                    break
                await asyncio.sleep(0)
    finally:
        await handler.aclose()
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


#: the SDK's note that this store streams to no other replica (a Python warning)
ALONE = "ignore:A VersionedTaskStore was configured without an event_stream"


@pytest.mark.filterwarnings(ALONE)
async def test_the_sdk_warns_after_a_cancel_stored_elsewhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert await _warnings_of_a_cancel_elsewhere(caplog, corrected=False) == [
        "Queue was closed during enqueuing. Event dropped.",
        "Dispatcher task is not running. Cannot wait for event dispatch.",
    ]


@pytest.mark.filterwarnings(ALONE)
async def test_the_correction_ends_such_a_run_quietly(caplog: pytest.LogCaptureFixture) -> None:
    assert await _warnings_of_a_cancel_elsewhere(caplog, corrected=True) == []


class _Done(AgentExecutor):
    """Completes its task at once."""

    async def execute(self, context: Any, event_queue: Any) -> None:
        ids = {"task_id": context.task_id, "context_id": context.context_id}
        state = TaskState.TASK_STATE_COMPLETED
        await event_queue.enqueue_event(new_task(**ids, state=state, history=[context.message]))

    async def cancel(self, context: Any, event_queue: Any) -> None:
        pass


@pytest.mark.parametrize("corrected", [False, True])
async def test_a_finished_task_is_freed_without_the_cyclic_collector(corrected: bool) -> None:
    """Once its run ended and the registry let it go, nothing but reference counting is
    needed to free the ``ActiveTask``: the correction's methods on its queues make no cycle
    with it (one kept every call's objects for the cyclic collector, issue 43)."""
    handler = DefaultRequestHandler(
        agent_executor=_Done(), task_store=InMemoryTaskStore(), agent_card=agent_card("http://x")
    )
    if corrected:
        drop_late_run_events(handler)
    registry: Any = handler._active_task_registry
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")])
    gc.collect()
    gc.disable()  # only reference counting frees anything from here on
    try:
        await handler.on_message_send(SendMessageRequest(message=message), ServerCallContext())
        (active,) = registry._active_tasks.values()
        freed = weakref.ref(active)
        del active
        for _ in range(1000):  # until its producer, consumer and cleanup are gone
            if not registry._active_tasks and freed() is None:
                break
            await asyncio.sleep(0)
        assert not registry._active_tasks
        assert freed() is None
    finally:
        gc.enable()
        await handler.aclose()
