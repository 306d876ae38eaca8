"""A run that ends without its final state stored (an application's own store refused it):
the drain gives its task up once the SDK's run of it has ended, named in one WARNING,
rather than waiting out shutdown_timeout for a save that cannot come. The store's save
listener the drain added goes with it."""

from __future__ import annotations

import asyncio
import gc
import logging
import tempfile
from pathlib import Path

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState

from apcore_a2a.ops import shutdown

from ._agent import build_registry, served
from .test_shutdown import _released_once_draining, _start_gated

#: Hang guard only: the stop waited this drain's whole shutdown_timeout (120 s) before.
GUARD = 60.0


async def _stopped_as_its_run_ends(store: InMemoryTaskStore) -> str:
    """Stop an agent on *store* whose one gated task is released (completes) once the
    drain has recorded it; the task's id."""
    with tempfile.TemporaryDirectory() as folder:
        gate = Path(folder) / "release"
        stop = served(build_registry(gated=True), task_store=store, shutdown_timeout=120)
        http, app = await stop.__aenter__()
        [task_id] = await _start_gated(http, gate, 1)
        releaser = _released_once_draining(app, gate)  # completed during the drain
        async with asyncio.timeout(GUARD):
            await stop.__aexit__(None, None, None)
        assert releaser.done()
    return str(task_id)


class _RefusesFinalStates(InMemoryTaskStore):
    """An application's store that refuses to keep a finished task."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            raise RuntimeError("this store keeps no finished task")
        await super().save(task, context)


async def test_a_final_state_the_store_refuses_ends_the_drain_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.ops.shutdown")
    task_id = await _stopped_as_its_run_ends(_RefusesFinalStates())
    named = [r for r in caplog.records if r.name == shutdown.logger.name]
    assert len(named) == 1, caplog.text
    said = named[0].getMessage()
    assert f"final state completed of task {task_id} is not stored" in said
    # An application's own store gets no restart recovery: no start will fail the task.
    assert said.endswith("own task store has no restart recovery: nothing marks the task failed")
    # The drain's listener is gone with it: the store's view keeps no reference to it.
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, shutdown._Saves)]


class _SlowFinalSave(InMemoryTaskStore):
    """A store whose one read fails while the final state's save is still on its way."""

    failing = False

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        if self.failing:
            self.failing = False
            raise ConnectionResetError("one read lost")
        return await super().get(task_id, context)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            self.failing = True
            await asyncio.sleep(0.5)
        await super().save(task, context)


async def test_one_failed_read_does_not_give_up_on_a_save_still_on_its_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.ops.shutdown")
    await _stopped_as_its_run_ends(_SlowFinalSave())
    # Before, the failed read gave the task up and warned it not stored; then it was.
    assert not [r for r in caplog.records if r.name == shutdown.logger.name], caplog.text
