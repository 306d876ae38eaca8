"""Store layers: the one base of every task-store wrapper, and the view at the chain's top.

The SDK tells plain stores from versioned ones by type, so a layer is one or the other.
The view (:func:`store_view`) runs save listeners in the saving coroutine (they must not
block) and answers a read once per request: a task read is kept in the call record for a
second at most, until it is saved, so a follow-up message (turn check, routing, the
SDK's own load) reads its stored task once. A save refused as a concurrent
modification ends every kept read of that task.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _TERMINAL
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskVersion,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

from apcore_a2a.edge.call import call_of

_T = TypeVar("_T")
SaveListener = Callable[[Task, ServerCallContext], None]
#: awaits one store call for the view (and may translate its errors)
Around = Callable[[Awaitable[Any]], Awaitable[Any]]
#: seconds a read stays good for later reads of the same request (a long stream reads anew)
_READ_TTL = 1.0
#: finished tasks remembered: at least a minute, at most 2 x 50,000 of them
_FINISHED_KEPT = (60.0, 50_000)


class Layer:
    """*inner* with ``list``/``peek`` passed through ``_call``; a subclass is a
    ``TaskStore`` or a ``VersionedTaskStore`` too."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def _call(self, call: Awaitable[_T]) -> _T:
        return await call

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page: ListTasksResponse = await self._call(self.inner.list(params, context))
        return page

    async def peek(self, task_id: str, context: ServerCallContext) -> Any:
        """The task's id, context and status where the store below can read just those
        (``streamed.py``: a resuming subscription need not read a long output); else
        the whole task."""
        read = getattr(self.inner, "peek", self.inner.get)
        return await self._call(read(task_id, context))


class _Recent:
    """Tasks noted in the last *window* seconds at least (at most twice that, or until
    *most* newer ones came), with when each was last noted: two generations of a plain
    dict, the older dropped whole. A ``TTLCache`` or ``FIFOCache`` did the same with
    Python-level bookkeeping on every call of the save path."""

    def __init__(self, window: float, most: int = sys.maxsize) -> None:
        self._window, self._most = window, most
        self._new: dict[str, float] = {}
        self._old: dict[str, float] = {}
        self._since = time.monotonic()

    def note(self, task_id: str, now: float) -> None:
        if now - self._since > self._window or len(self._new) >= self._most:
            self._old, self._new, self._since = self._new, {}, now
        self._new[task_id] = now

    def last(self, task_id: str) -> float:
        found = self._new.get(task_id)
        return found if found is not None else self._old.get(task_id, 0.0)

    def forget(self, task_id: str) -> None:
        self._new.pop(task_id, None)
        self._old.pop(task_id, None)


class _Listeners:
    """Listeners called in the order they were added: a tuple, replaced whole, so that a
    save calling them meanwhile goes through the ones it started with."""

    def __init__(self, *first: SaveListener) -> None:
        self.all = first

    def add(self, listener: SaveListener) -> Callable[[], None]:
        """Add *listener*; returns its removal (calling it again does nothing)."""

        def entry(task: Task, context: ServerCallContext) -> None:  # one per call
            listener(task, context)

        self.all = (*self.all, entry)

        def remove() -> None:
            self.all = tuple(named for named in self.all if named is not entry)

        return remove


class _ViewMixin(Layer):
    _around: Around | None
    _saved: _Listeners
    #: told of a save that raised (not a concurrent modification's refusal)
    _failed: _Listeners
    #: task id -> when it was last saved through a view of this chain (any request); a
    #: save older than :data:`_READ_TTL` cannot be newer than a read still in use
    _saves: _Recent
    #: tasks this chain read or saved in a terminal state lately (a late save races its
    #: task's end by moments)
    _finished: _Recent

    async def _call(self, call: Awaitable[_T]) -> _T:
        result: _T = await (call if self._around is None else self._around(call))
        return result

    def on_save(self, listener: SaveListener) -> Callable[[], None]:
        """Call *listener* after each successful save too, after those named before, until
        the callable returned is called."""
        return self._saved.add(listener)

    def on_unsaved(self, listener: SaveListener) -> Callable[[], None]:
        """Call *listener* after each save that raised too (a store outage, a value refused:
        not a concurrent modification's refusal), after those named before, until the
        callable returned is called."""
        return self._failed.add(listener)

    async def get(self, task_id: str, context: ServerCallContext) -> Any:
        reads = _reads(context)
        now = time.monotonic()
        hit = reads.get(task_id)
        if hit is None or now - hit[1] > _READ_TTL or self._saves.last(task_id) >= hit[1]:
            found = await self._call(self.inner.get(task_id, context))
            reads[task_id] = hit = (found, now)
            if found is not None and _task(found).status.state in _TERMINAL:
                self._finished.note(task_id, now)
        return _copy(hit[0])

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        _reads(context).pop(task_id, None)
        self._finished.forget(task_id)
        await self._call(self.inner.delete(task_id, context))

    async def _save(
        self, task: Task, context: ServerCallContext, saving: Coroutine[Any, Any, _T]
    ) -> _T:
        task_id = task.id  # a protobuf field: each read makes a new str
        reads = _reads(context)
        reads.pop(task_id, None)
        try:
            if self._finished.last(task_id):
                saving.close()  # never started: nothing to undo
                # A finished task is final (it takes no message, spec §3.1.1, and no
                # cancel, §3.1.5). a2a-sdk 1.3's run goes on saving the events its agent
                # queued after it re-read the task as finished (a cancel won), with the
                # fresh version: the result overwrote CANCELED.
                raise ConcurrentTaskModificationError(task_id)
            result = await self._call(saving)
        except ConcurrentTaskModificationError:
            # Another writer (a cancel, a replica) moved the task on: no read kept before
            # now is current, whichever request kept it. The SDK re-reads after this,
            # sometimes through another request's context (ActiveTask.cancel swaps it).
            self._saves.note(task_id, time.monotonic())
            raise
        except Exception:
            for failed in self._failed.all:
                failed(task, context)
            raise
        now = time.monotonic()
        self._saves.note(task_id, now)
        if task.status.state in _TERMINAL:
            self._finished.note(task_id, now)
        reads.pop(task_id, None)
        for listener in self._saved.all:
            listener(task, context)
        return result


def _reads(context: ServerCallContext) -> dict[str, tuple[Any, float]]:
    """What this request read (its call record's ``reads``); a context the edge did not
    build keeps none."""
    call = call_of(context)
    return call.reads if call is not None else {}


def last_read(context: ServerCallContext, task_id: str) -> Task | None:
    """*task_id* as this request last read it through the store view (``None``: not read,
    or not found)."""
    hit = _reads(context).get(task_id)
    return None if hit is None or hit[0] is None else _task(hit[0])


def _task(found: Any) -> Task:
    return found.task if isinstance(found, StoredTask) else found


def copy_task(task: Task) -> Task:
    """A copy of *task*: a store hands out, and keeps, none that its caller may change."""
    copy = Task()
    copy.CopyFrom(task)
    return copy


def _copy(found: Any) -> Any:
    if found is None:
        return None
    task = copy_task(_task(found))
    return StoredTask(task, found.version) if isinstance(found, StoredTask) else task


class _View(_ViewMixin, TaskStore):
    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._save(task, context, self.inner.save(task, context))


class _VersionedView(_ViewMixin, VersionedTaskStore):
    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        saving = self.inner.save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )
        version: TaskVersion = await self._save(task, context, saving)
        return version


def store_view(
    store: TaskStore | VersionedTaskStore,
    *,
    around: Around | None = None,
    saved: SaveListener | None = None,
    failed: SaveListener | None = None,
) -> TaskStore | VersionedTaskStore:
    """*store* (plain or versioned) with every call awaited through *around*, *saved*
    called after each successful save and *failed* after each save that raised (a store
    outage, a value refused: not a concurrent modification's refusal)."""
    view = _VersionedView(store) if isinstance(store, VersionedTaskStore) else _View(store)
    view._around = around
    view._saved = _Listeners() if saved is None else _Listeners(saved)
    view._failed = _Listeners() if failed is None else _Listeners(failed)
    view._saves, view._finished = _Recent(_READ_TTL), _Recent(*_FINISHED_KEPT)
    return view
