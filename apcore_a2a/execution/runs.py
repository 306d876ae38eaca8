"""Bookkeeping for one ``execute()`` in progress (see :class:`Run`).

Kept apart from the executor so that the cancellation rules -- a canceled run emits
nothing more, a finished run is not overwritten by a late cancel, and tasks a module left
behind are cancelled with it -- live in one small place.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Coroutine, Generator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from a2a.server.events import EventQueue
from a2a.types import TaskState, TaskStatusUpdateEvent
from apcore import CancelToken

__all__ = ["CURRENT_RUN", "Run", "TaskTracker"]

_TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


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
    #: asyncio tasks started while the module ran (see TaskTracker)
    spawned: weakref.WeakSet[asyncio.Task[Any]] = field(default_factory=weakref.WeakSet)

    async def emit(self, queue: EventQueue, event: Any) -> None:
        if self.canceled:
            return
        if isinstance(event, TaskStatusUpdateEvent) and event.status.state in _TERMINAL:
            self.ended = True
        await queue.enqueue_event(event)

    def stop(self) -> None:
        """Cancel the module: its apcore token, and any task it left running."""
        self.token.cancel()
        for task in list(self.spawned):
            task.cancel()


_T = TypeVar("_T")

#: the run whose module is executing in the current asyncio context
CURRENT_RUN: ContextVar[Run | None] = ContextVar("apcore_a2a_run", default=None)


class TaskTracker:
    """Loop task factory that remembers which run started each task.

    apcore awaits an async module through ``asyncio.wait`` on a task of its own, so
    cancelling our await (client cancel, execution timeout, shutdown) would leave that
    task running with nobody waiting for it. Tasks created while a module runs are
    recorded on its ``Run`` and cancelled with it. Any factory already installed is
    kept and called first.
    """

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, _T] | Generator[Any, None, _T],
        /,
        **kwargs: Any,
    ) -> asyncio.Future[_T]:
        task: asyncio.Future[_T]
        if self.previous is not None:
            task = self.previous(loop, coro, **kwargs)
        else:
            task = asyncio.Task(coro, loop=loop, **kwargs)
        run = CURRENT_RUN.get()
        if run is not None and isinstance(task, asyncio.Task):
            run.spawned.add(task)
        return task

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop) -> None:
        current = loop.get_task_factory()
        if not isinstance(current, cls):
            loop.set_task_factory(cls(current))
