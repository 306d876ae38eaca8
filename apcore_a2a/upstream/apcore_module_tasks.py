"""The task apcore runs an async module in stops with the run that called it.

Upstream (apcore 0.32.2, ``BuiltinExecute``): under a timeout (every call has one by
default) an async module's coroutine runs in a task of its own (``asyncio.ensure_future``,
awaited through ``asyncio.wait``), and cancelling the caller does not cancel that task: the
module runs on, unseen, after an A2A cancel or our ``execution_timeout``. So the execute
step is handed a view of the module whose ``execute`` records the task it runs in, for the
run to cancel (``execution/runs.py``). Deletable when apcore cancels the module's task
with its caller: ``tests/upstream/test_apcore_module_tasks.py`` fails then.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class TrackedModule:
    """*module* as apcore's execute step sees it: the task its ``execute`` runs in, when
    apcore started one (not *home*, the caller's own), goes into *spawned*."""

    module: Any
    spawned: weakref.WeakSet[asyncio.Task[Any]]
    home: asyncio.Task[Any] | None

    async def execute(self, inputs: Any, context: Any) -> Any:
        task = asyncio.current_task()
        if task is not None and task is not self.home:
            self.spawned.add(task)
        return await self.module.execute(inputs, context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


def tracked(module: Any, spawned: weakref.WeakSet[asyncio.Task[Any]]) -> TrackedModule:
    """*module* (with an async ``execute``), recording apcore's task for it in *spawned*."""
    return TrackedModule(module, spawned, asyncio.current_task())
