"""A task store seen through a view with two hooks: around each call, after each save.

Features that must follow task states without reading the store again (0.3 push
deliveries, per-caller task quotas) listen to saves; the outage guard (``outages.py``)
wraps every call. The view keeps the store's kind (plain or versioned, which the SDK
tells apart by type) and passes anything else (capacity, ...) through to the store.
A save listener runs right after a save succeeded, in the saving coroutine, and must
not block.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from a2a.server.cluster import StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

__all__ = ["Around", "SaveListener", "observe_saves", "store_view"]

_T = TypeVar("_T")
SaveListener = Callable[[Task, ServerCallContext], None]
#: awaits one store call for the view (and may translate its errors)
Around = Callable[[Awaitable[Any]], Awaitable[Any]]


async def _plain(call: Awaitable[_T]) -> _T:
    return await call


def _ignore(task: Task, context: ServerCallContext) -> None:
    return None


def store_view(
    store: TaskStore | VersionedTaskStore,
    *,
    around: Around = _plain,
    saved: SaveListener = _ignore,
) -> TaskStore | VersionedTaskStore:
    """*store* (plain or versioned) with every call awaited through *around* and *saved*
    called after each successful save."""
    if isinstance(store, VersionedTaskStore):
        return _VersionedView(store, around, saved)
    return _View(store, around, saved)


def observe_saves(
    store: TaskStore | VersionedTaskStore, listener: SaveListener
) -> TaskStore | VersionedTaskStore:
    """*store* with *listener* called after each successful save."""
    return store_view(store, saved=listener)


class _View(TaskStore):
    def __init__(self, inner: TaskStore, around: Around, saved: SaveListener) -> None:
        self.inner = inner
        self._around = around
        self._saved = saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the store's own extras (capacity, ...)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._around(self.inner.save(task, context))
        self._saved(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        found: Task | None = await self._around(self.inner.get(task_id, context))
        return found

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page: ListTasksResponse = await self._around(self.inner.list(params, context))
        return page

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._around(self.inner.delete(task_id, context))


class _VersionedView(VersionedTaskStore):
    def __init__(self, inner: VersionedTaskStore, around: Around, saved: SaveListener) -> None:
        self.inner = inner
        self._around = around
        self._saved = saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

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
        version: TaskVersion = await self._around(saving)
        self._saved(task, context)
        return version

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        found: StoredTask | None = await self._around(self.inner.get(task_id, context))
        return found

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page: ListTasksResponse = await self._around(self.inner.list(params, context))
        return page

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._around(self.inner.delete(task_id, context))
