"""The module as apcore's ``execute`` step sees it in our runs (``execution/runs.py``): a
plain ``def execute`` runs on the agent's ``sync_workers`` pool, not on the host loop's
default executor, and the task apcore runs the module in (under a timeout) is recorded
for the run to cancel.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class RunModule:
    """*module* with an async ``execute`` (on *pool* for a sync module) that puts the task
    it runs in, when apcore started one (not *home*, the caller's own), into *spawned*."""

    module: Any
    spawned: weakref.WeakSet[asyncio.Task[Any]]
    home: asyncio.Task[Any] | None
    pool: Executor | None = None

    async def execute(self, inputs: Any, context: Any) -> Any:
        task = asyncio.current_task()
        if task is not None and task is not self.home:
            self.spawned.add(task)
        if self.pool is None:
            return await self.module.execute(inputs, context)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.module.execute, inputs, context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)
