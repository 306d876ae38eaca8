"""A run whose save fails (the store went down while it ran) is one line naming the task
and the store's error: no traceback, and no asyncio "Task exception was never retrieved".
Before, a2a-sdk logged ``Consumer[<id>]: Failed`` at ERROR with a traceback through our
store chain, and its consumer's task ended with the exception of its failed write of the
FAILED state, which nobody retrieved: two more tracebacks when it was collected."""

from __future__ import annotations

import asyncio
import gc
import logging
import tempfile
from pathlib import Path

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task

from ._agent import build_registry, served
from .test_shutdown import _start_gated


class _Outage(InMemoryTaskStore):
    """An application's store that stops taking saves when told."""

    down = False

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if self.down:
            raise RuntimeError("this store is down")
        await super().save(task, context)


async def test_a_run_whose_save_fails_is_one_line_naming_the_task_and_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    store = _Outage()
    with tempfile.TemporaryDirectory() as folder:
        gate = Path(folder) / "release"
        async with served(build_registry(gated=True), task_store=store) as (http, _app):
            [task_id] = await _start_gated(http, gate, 1)
            store.down = True
            gate.touch()  # the run completes; its save and its FAILED write both fail
            said = f"Task {task_id}: its state could not be saved"
            async with asyncio.timeout(30):  # a hang guard
                while not any(said in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.02)
            store.down = False
    gc.collect()  # the run's tasks are gone: an unretrieved exception is logged now
    await asyncio.sleep(0)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        f"{said} (RuntimeError: this store is down); its run ended"
    ], caplog.text
    assert errors[0].exc_info is None
    assert "never retrieved" not in caplog.text
