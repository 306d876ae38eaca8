"""A run that does not end when the request handler closes it does not hold the app's stop.

The lifespan's stop closes a2a-sdk's request handler (``handler.aclose()``) once the drain
is over; that cancels each run's producer and consumer and waits for both. A consumer that
does not take its cancel, here in an application's store whose save goes on (SQLAlchemy
closes a cancelled aiosqlite connection under ``asyncio.shield``: a SQLite file locked by
another replica holds that close), held the stop for ever: the features, operations and
stores were never closed, and an agent served in another program's loop (``running_server``,
a mounted app, ``async_serve``) never finished its lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState

from ._agent import build_registry, send, served

#: Hang guard only (the stop waits its 1 s shutdown_timeout and a 2 s grace here).
GUARD = 20.0


class _StuckFinalSave(InMemoryTaskStore):
    """An application's store whose save of a finished task goes on, cancelled or not,
    until the test lets it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            self.entered.set()
            while not self.release.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await self.release.wait()
        await super().save(task, context)


async def test_a_run_that_ignores_the_handlers_close_is_abandoned_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.ops.shutdown")
    store = _StuckFinalSave()
    agent = contextlib.AsyncExitStack()
    stopping: asyncio.Future[None] | None = None
    try:
        http, _app = await agent.enter_async_context(
            served(build_registry(), task_store=store, shutdown_timeout=1)
        )
        task = await send(http, "ops.sleep", {"seconds": 0}, return_immediately=True)
        await asyncio.wait_for(store.entered.wait(), GUARD)
        # The stop: the drain names the final state it did not see stored, then the
        # handler's close cancels the run, whose save does not end. (Not wait_for: the
        # harness's exit takes a cancel as the end of the server, and returns.)
        stopping = asyncio.ensure_future(agent.aclose())
        await asyncio.wait([stopping], timeout=GUARD)
        if not stopping.done():
            pytest.fail(f"the stop still waits for the handler's close after {GUARD} s")
        stopping.result()
    finally:
        store.release.set()  # the save ends: nothing of the run outlives the test
        await asyncio.wait_for(stopping if stopping is not None else agent.aclose(), GUARD)
    closes = [r for r in caplog.records if "did not close" in r.getMessage()]
    assert len(closes) == 1, caplog.text
    assert closes[0].levelno == logging.WARNING
    assert task["id"] in closes[0].getMessage(), caplog.text
