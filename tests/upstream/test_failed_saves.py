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
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState

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


async def _run(corrected: bool, caplog: pytest.LogCaptureFixture) -> tuple[bool, list[Any]]:
    """One run whose final save fails: whether its consumer's exception is left unretrieved
    (asyncio's own flag for "never retrieved"), and the SDK logger's records (message, with
    a traceback or not)."""
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=_GoesDown(), agent_card=agent_card("x")
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
        with pytest.raises(RuntimeError, match="this store is down"):
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
