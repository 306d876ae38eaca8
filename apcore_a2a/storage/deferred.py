"""Fewer writes per task: what a blocking call passes through waits in memory.

The SDK stores a task at every event: a blocking ``SendMessage`` for ``math.add`` is four
transactions (submitted, working, working with the artifact, completed) and three reads of
a task id it has just made up. Only the last state is ever seen by the caller, who gets
the answer once it is stored. :class:`DeferredWrites` wraps a SQL task store so that

* the states a blocking call passes through on its way (``submitted``, ``working``) are
  kept in memory and written only if the call is still running :data:`WRITE_DELAY`
  seconds later (then at most once per delay), so a long task is durable and restart
  recovery closes it out as before;
* the state a call answers with (terminal, ``input-required``, ``auth-required``) and
  every state of a task whose id the caller already holds (streams,
  ``returnImmediately``, a push config's webhook) is written at once, before the answer,
  as before;
* reads of a task this process made up and has not stored yet are answered from memory.

Reads in this process see the kept state at once. Another process (a ``db`` command, a
second agent on the same database) sees a blocking call's task only once it is written:
cluster mode, where replicas share tasks and their events, keeps them by the same rule
with their versions and events (:mod:`.cluster_deferred`).
A process killed within the delay loses a task whose answer was never sent.

The request handler marks the calls (``DEFER_STATE_KEY``, ``NEW_TASK_STATE_KEY`` in the
call context's state).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Task, TaskState

from .observed import TaskStoreLayer

__all__ = [
    "DEFER_STATE_KEY",
    "NEW_TASK_STATE_KEY",
    "WRITE_DELAY",
    "DeferredWrites",
    "forget_new",
    "made_up_here",
]

logger = logging.getLogger(__name__)

#: Seconds a blocking call's passing state may wait in memory before it is written.
WRITE_DELAY = 1.0
#: call-context state: this request answers only when its task settles (blocking send)
DEFER_STATE_KEY = "apcore_a2a_defer_writes"
#: call-context state: the id this request made up for a new task (nothing stored yet)
NEW_TASK_STATE_KEY = "apcore_a2a_new_task_id"

_PASSING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


@dataclass(slots=True, eq=False)
class _Kept:
    task: Task
    context: ServerCallContext
    owner: str
    timer: asyncio.TimerHandle | None = None
    writing: asyncio.Task[None] | None = None
    #: bumped by each save, so a write knows whether it wrote the newest state
    revision: int = 0
    written: int = -1


class DeferredWrites(TaskStoreLayer):
    """*inner* with the write rule of the module docstring; *owner* scopes reads as
    *inner* does (the SDK's owner resolver); *write* replaces ``inner.save`` (group
    commit, ``_group_commit.py``)."""

    def __init__(
        self,
        inner: TaskStore,
        owner: Callable[[ServerCallContext], str],
        *,
        delay: float = WRITE_DELAY,
        write: Callable[[Task, ServerCallContext], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(inner)
        self._owner = owner
        self._save = write if write is not None else inner.save
        self._delay = delay
        self._kept: dict[str, _Kept] = {}

    async def save(self, task: Task, context: ServerCallContext) -> None:
        kept = self._kept.get(task.id)
        if task.status.state in _PASSING and context.state.get(DEFER_STATE_KEY):
            self._keep(task, context, kept)
            forget_new(task.id, context)
            return
        if kept is not None:
            # This write supersedes the kept state; one already under way lands first.
            del self._kept[task.id]
            if kept.timer is not None:
                kept.timer.cancel()
            if kept.writing is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(kept.writing)
        await self._save(task, context)
        forget_new(task.id, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        kept = self._kept.get(task_id)
        if kept is not None:
            if kept.owner != self._owner(context):
                return None
            copy = Task()
            copy.CopyFrom(kept.task)
            return copy
        if made_up_here(task_id, context):
            return None
        found: Task | None = await self.inner.get(task_id, context)
        return found

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        kept = self._kept.pop(task_id, None)
        if kept is not None and kept.timer is not None:
            kept.timer.cancel()
        await self.inner.delete(task_id, context)

    async def aclose(self) -> None:
        """Write what is still kept (a stop without a drain) and wait for it."""
        for task_id, kept in list(self._kept.items()):
            if kept.timer is not None:
                kept.timer.cancel()
                self._write(task_id)
        writes = [k.writing for k in self._kept.values() if k.writing is not None]
        if writes:
            await asyncio.gather(*writes, return_exceptions=True)

    # -- internals -----------------------------------------------------------------
    def _keep(self, task: Task, context: ServerCallContext, kept: _Kept | None) -> None:
        copy = Task()
        copy.CopyFrom(task)
        if kept is None:
            kept = _Kept(task=copy, context=context, owner=self._owner(context))
            self._kept[task.id] = kept
        else:
            kept.task, kept.context = copy, context
        kept.revision += 1
        if kept.timer is None and kept.writing is None:
            loop = asyncio.get_running_loop()
            kept.timer = loop.call_later(self._delay, self._write, task.id)

    def _write(self, task_id: str) -> None:
        kept = self._kept.get(task_id)
        if kept is None:
            return
        kept.timer = None
        kept.writing = asyncio.ensure_future(self._written(task_id, kept))

    async def _written(self, task_id: str, kept: _Kept) -> None:
        revision = kept.revision
        try:
            await self._save(kept.task, kept.context)
            kept.written = revision
        except Exception as exc:
            logger.warning("task %s: deferred write failed: %s", task_id, type(exc).__name__)
        finally:
            kept.writing = None
        if self._kept.get(task_id) is not kept:
            return  # superseded by a direct write meanwhile
        if kept.revision == kept.written:
            del self._kept[task_id]  # stored as kept: read it from the store again
        else:
            loop = asyncio.get_running_loop()
            kept.timer = loop.call_later(self._delay, self._write, task_id)


def made_up_here(task_id: str, context: ServerCallContext) -> bool:
    """Whether *task_id* is the id this request made up and has not saved yet (nothing
    can be stored under it: a uuid4 of this process)."""
    return bool(context.state.get(NEW_TASK_STATE_KEY) == task_id)


def forget_new(task_id: str, context: ServerCallContext) -> None:
    """After the first save of a made-up id, the store answers for it."""
    if context.state.get(NEW_TASK_STATE_KEY) == task_id:
        del context.state[NEW_TASK_STATE_KEY]
