"""The module as apcore's ``execute`` step sees it in our runs (``execution/runs.py``): a
plain ``def execute`` runs on the agent's ``sync_workers`` pool, not on the host loop's
default executor, in the context variables the run hands it, and the task apcore runs the
module in (under a timeout) is recorded for the run to cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, eq=False)
class RunModule:
    """*module* with an async ``execute`` (on *pool* for a sync module) that puts the task
    it runs in, when apcore started one (not *home*, the caller's own), into *spawned*."""

    module: Any
    spawned: weakref.WeakSet[asyncio.Task[Any]]
    home: asyncio.Task[Any] | None
    pool: Executor | None = None
    #: a context the module's call runs in, from start to return (in its thread, for a
    #: sync module): how the run knows a module that ignored its cancel still runs
    tracked: Callable[[], contextlib.AbstractContextManager[None]] | None = None
    #: the context variables a sync module's thread sees (a copy of the call's, as
    #: ``asyncio.to_thread`` gives; by default none): one call's, entered by one thread
    thread_context: contextvars.Context = field(default_factory=contextvars.Context)

    async def execute(self, inputs: Any, context: Any) -> Any:
        task = asyncio.current_task()
        if task is not None and task is not self.home:
            self.spawned.add(task)
        if self.pool is None:
            with self.tracked() if self.tracked is not None else contextlib.nullcontext():
                return await self.module.execute(inputs, context)
        loop = asyncio.get_running_loop()
        call = self.module.execute
        return await loop.run_in_executor(
            self.pool, self.thread_context.run, _in_thread, self.tracked, call, inputs, context
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


def _in_thread(
    tracked: Callable[[], contextlib.AbstractContextManager[None]] | None,
    call: Callable[[Any, Any], Any],
    inputs: Any,
    context: Any,
) -> Any:
    with tracked() if tracked is not None else contextlib.nullcontext():
        return call(inputs, context)
