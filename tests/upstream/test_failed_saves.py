"""The SDK behaviour ``apcore_a2a/upstream/failed_saves.py`` answers, on a plain
``DefaultRequestHandler``: a run whose final save fails, and whose write of the FAILED
state fails too, is logged ``Consumer[<id>]: Failed`` at ERROR with a traceback, and its
consumer's task ends with an exception nobody retrieves (asyncio's "Task exception was
never retrieved" once it is collected). A failure of ``test_the_sdk_...`` means the SDK
retrieves it and logs no traceback: delete that file (and its filter's feature)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import InternalError, InvalidAgentResponseError

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.upstream import failed_saves
from apcore_a2a.upstream.failed_saves import LOGGER
from tests.client._sdk_agent import EchoExecutor, agent_card


class _GoesDown(InMemoryTaskStore):
    """A store that goes down once the run's task is stored working."""

    down = False

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if self.down:
            raise RuntimeError("this store is down")
        await super().save(task, context)
        self.down = task.status.state == TaskState.TASK_STATE_WORKING


async def _run(
    corrected: bool,
    caplog: pytest.LogCaptureFixture,
    executor: AgentExecutor | None = None,
    store: TaskStore | None = None,
    raised: type[Exception] = RuntimeError,
) -> tuple[bool, list[Any]]:
    """One run whose final save fails (or what *executor*, *store* make fail, raising
    *raised* to the request): whether its consumer's exception is left unretrieved
    (asyncio's own flag for "never retrieved"), and the SDK logger's records (message, with
    a traceback or not)."""
    handler = DefaultRequestHandler(
        agent_executor=executor or EchoExecutor(),
        task_store=store or _GoesDown(),
        agent_card=agent_card("x"),
    )
    registry, runs = handler._active_task_registry, []
    get_or_create = registry.get_or_create

    async def kept(*args: Any, **kwargs: Any) -> Any:
        runs.append(run := await get_or_create(*args, **kwargs))
        return run

    registry.get_or_create = kept  # type: ignore[method-assign]
    if corrected:
        failed_saves.report_failed_saves(handler)
        await failed_saves.attach()
    try:
        message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hi")])
        with pytest.raises(raised):
            await handler.on_message_send(SendMessageRequest(message=message), ServerCallContext())
        consumer = runs[0]._consumer_task
        await asyncio.wait([consumer])
    finally:
        if corrected:
            await failed_saves.detach()
    unretrieved = bool(consumer._log_traceback)  # what asyncio reports when it is collected
    consumer.exception()  # retrieved here: this test leaves nothing for the loop to report
    said = [(r.msg, bool(r.exc_info)) for r in caplog.records if r.name == LOGGER]
    return unretrieved, said


async def test_the_sdk_leaves_a_failed_runs_exception_unretrieved(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    unretrieved, said = await _run(False, caplog)
    assert unretrieved
    assert said == [("Consumer[%s]: Failed", True)]


async def test_the_correction_retrieves_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    unretrieved, said = await _run(True, caplog)
    assert not unretrieved
    assert said == [("Task %s: its state could not be saved (%s); its run ended", False)]


class _Raises(AgentExecutor):
    """A run that raises an A2A error of the SDK's (an application executor may)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise InternalError(message="the executor's own failure")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class _TwoMessages(_Raises):
    """A run whose second message the SDK refuses (``InvalidAgentResponseError``)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        for n in (1, 2):
            reply = Message(message_id=f"r{n}", role=Role.ROLE_AGENT, parts=[Part(text="x")])
            await event_queue.enqueue_event(reply)


class _Unavailable(InMemoryTaskStore):
    """A store of ours that is down: it raises our own error (an ``A2AError`` too)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        raise StoreUnavailableError()


@pytest.mark.parametrize(
    ("executor", "raised"),
    [(_Raises(), InternalError), (_TwoMessages(), InvalidAgentResponseError)],
    ids=["producer-raised", "event-refused"],
)
async def test_a_consumer_that_failed_on_no_save_keeps_the_sdks_record(
    executor: AgentExecutor, raised: type[Exception], caplog: pytest.LogCaptureFixture
) -> None:
    # Through our handler's runs, every consumer that failed was said to have failed a
    # save: "its state could not be saved (InternalError: ...)", its traceback dropped.
    # Not reachable with our own executor (its runs raise no A2A error of the SDK's past
    # a wiring error, and queue no event the SDK refuses): shown on the seam itself.
    caplog.set_level(logging.ERROR, logger=LOGGER)
    _, said = await _run(True, caplog, executor, InMemoryTaskStore(), raised)
    assert ("Consumer[%s]: Failed", True) in said
    assert not [m for m, _ in said if "could not be saved" in str(m)]


async def test_our_own_store_error_is_still_a_failed_save(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    _, said = await _run(True, caplog, store=_Unavailable(), raised=StoreUnavailableError)
    assert said == [("Task %s: its state could not be saved (%s); its run ended", False)]
