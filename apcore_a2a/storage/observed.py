"""A task store seen through a view that tells a listener about every save.

Features that must follow task states without reading the store again (0.3 push
deliveries, per-caller task quotas) wrap the store the request handler gets; the
listener runs right after a save succeeded, in the saving coroutine, and must not block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2a.server.cluster import StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

__all__ = ["SaveListener", "observe_saves"]

SaveListener = Callable[[Task, ServerCallContext], None]


def observe_saves(
    store: TaskStore | VersionedTaskStore, listener: SaveListener
) -> TaskStore | VersionedTaskStore:
    """*store* (plain or versioned) with *listener* called after each successful save."""
    if isinstance(store, VersionedTaskStore):
        return _ObservedVersionedStore(store, listener)
    return _ObservedStore(store, listener)


class _ObservedStore(TaskStore):
    def __init__(self, inner: TaskStore, listener: SaveListener) -> None:
        self.inner = inner
        self._listener = listener

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # the store's own extras (capacity, ...)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self.inner.save(task, context)
        self._listener(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self.inner.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self.inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.inner.delete(task_id, context)


class _ObservedVersionedStore(VersionedTaskStore):
    def __init__(self, inner: VersionedTaskStore, listener: SaveListener) -> None:
        self.inner = inner
        self._listener = listener

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
        version = await self.inner.save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )
        self._listener(task, context)
        return version

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        return await self.inner.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self.inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.inner.delete(task_id, context)
