"""The task apcore runs an async module in (under a timeout), recorded for the run to cancel
(``execution/runs.py``).
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
