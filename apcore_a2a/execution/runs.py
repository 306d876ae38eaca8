"""Bookkeeping for one ``execute()`` in progress (see :class:`Run`).

Kept apart from the executor so that the cancellation rules -- a canceled run emits
nothing more, a finished run is not overwritten by a late cancel, and the task apcore
runs an async module in is cancelled with it -- live in one small place.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _TERMINAL
from a2a.server.events import EventQueue
from a2a.types import TaskStatusUpdateEvent
from apcore import CancelToken

from apcore_a2a.execution.schema_cache import WrappedStep

__all__ = ["CURRENT_RUN", "Run", "track_module_tasks"]


@dataclass(slots=True)
class Run:
    """One ``execute()`` in progress.

    The SDK cancels ``execute()`` only after ``cancel()`` has enqueued CANCELED, so a
    result that lands in between must not follow it into the queue: ``canceled`` stops
    all further events. ``ended`` records that a terminal event was already enqueued,
    so a late cancel does not overwrite a finished task.
    """

    token: CancelToken = field(default_factory=CancelToken)
    canceled: bool = False
    ended: bool = False
    #: the question (``turns.PendingInput``) this run's input answers, if any
    answering: Any = None
    #: the apcore ``Context.data`` the module ran with (read back for ``reply_as``)
    data: dict[str, Any] | None = None
    #: the tasks apcore ran the module in (see track_module_tasks)
    spawned: weakref.WeakSet[asyncio.Task[Any]] = field(default_factory=weakref.WeakSet)

    async def emit(self, queue: EventQueue, event: Any) -> None:
        if self.canceled:
            return
        if isinstance(event, TaskStatusUpdateEvent) and event.status.state in _TERMINAL:
            self.ended = True
        await queue.enqueue_event(event)

    def stop(self) -> None:
        """Cancel the module: its apcore token, and the task apcore runs it in."""
        self.token.cancel()
        for task in list(self.spawned):
            task.cancel()


#: the run whose module is executing in the current asyncio context
CURRENT_RUN: ContextVar[Run | None] = ContextVar("apcore_a2a_run", default=None)

_EXECUTE_STEP = "execute"


class _TrackedModule:
    """The module as apcore's ``execute`` step sees it during one of our runs.

    Its ``execute`` is the module's coroutine with one line in front: when it runs in a
    task other than the one awaiting apcore (apcore puts an async module in a task of its
    own to apply its timeouts, and does not cancel that task when its caller is
    cancelled), that task is recorded on the run, so :meth:`Run.stop` cancels it.
    """

    __slots__ = ("_home", "_module", "_run")

    def __init__(self, module: Any, run: Run, home: asyncio.Task[Any] | None) -> None:
        self._module = module
        self._run = run
        self._home = home

    async def execute(self, inputs: Any, context: Any) -> Any:
        task = asyncio.current_task()
        if task is not None and task is not self._home:
            self._run.spawned.add(task)
        return await self._module.execute(inputs, context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class _TrackingExecuteStep(WrappedStep):
    """apcore's ``execute`` step, handed a :class:`_TrackedModule` for our runs' async modules."""

    async def execute(self, ctx: Any) -> Any:
        run = CURRENT_RUN.get()
        module = ctx.module
        if run is None or module is None or not inspect.iscoroutinefunction(module.execute):
            return await self.inner.execute(ctx)
        ctx.module = _TrackedModule(module, run, asyncio.current_task())
        try:
            return await self.inner.execute(ctx)
        finally:
            ctx.module = module


def track_module_tasks(executor: Any) -> None:
    """Let the runs of *executor* cancel the tasks apcore starts for their modules.

    Wraps the ``execute`` step of this executor's strategy (apcore's public pipeline API;
    idempotent). Calls made outside our runs pass through unchanged, and nothing else in
    the process is touched (no loop-wide task factory).
    """
    strategy: Any = getattr(executor, "current_strategy", None)  # None: not an apcore Executor
    step = next((s for s in getattr(strategy, "steps", ()) if s.name == _EXECUTE_STEP), None)
    if step is not None and not isinstance(step, _TrackingExecuteStep):
        strategy.replace(_EXECUTE_STEP, _TrackingExecuteStep(step))
