"""The apcore behaviour ``apcore_a2a/upstream/apcore_execute.py`` answers: cancelling
``Executor.call_async``, or apcore's own per-module timeout, leaves the task apcore runs an
async module in running to its end.
A failure here means apcore cancels that task with its caller now: drop the tracking there
(and in ``execution/runs.py``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from apcore import Executor, Registry
from pydantic import BaseModel


class _Empty(BaseModel):
    pass


class _Slow:
    input_schema = _Empty
    output_schema = _Empty
    description = "Wait a little"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.finished = asyncio.Event()
        self.cancelled = False

    async def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.started.set()
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished.set()
        return {}


async def test_cancelling_the_caller_leaves_the_module_task_running() -> None:
    module = _Slow()
    registry = Registry()
    registry.register("slow.wait", module)
    call = asyncio.ensure_future(Executor(registry).call_async("slow.wait", {}))
    await asyncio.wait_for(module.started.wait(), 10)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    await asyncio.wait_for(module.finished.wait(), 10)
    assert not module.cancelled  # it ran on after its caller was cancelled


async def test_apcores_own_timeout_leaves_the_module_task_running() -> None:
    module = _Slow()
    module.resources = {"timeout": 50}  # type: ignore[attr-defined]
    registry = Registry()
    registry.register("slow.wait", module)
    with contextlib.suppress(Exception):
        await Executor(registry).call_async("slow.wait", {})
    assert module.started.is_set() and not module.finished.is_set()
    await asyncio.wait_for(module.finished.wait(), 10)
    assert not module.cancelled  # apcore only consumes its late result
