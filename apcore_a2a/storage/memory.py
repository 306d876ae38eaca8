"""A bounded in-memory task store (the rules: ``docs/storage.md``, *The memory store is bounded*).

The SDK's ``InMemoryTaskStore`` does the rest; this class decides which tasks to
forget, in O(1) amortized: the owner holding the most finished tasks gives its oldest up
(``owner_queues.py``), so one caller's quick tasks evict its own, never another owner's
before their TTL. It also answers ``ListTasks`` from lists kept in order
(``memory_pages.py``) rather than sorting the caller's tasks for every page.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from a2a.auth.user import UnauthenticatedUser
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _TERMINAL
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

from .memory_pages import TaskOrder
from .owner_queues import OwnerQueues

logger = logging.getLogger(__name__)
_Key = tuple[str, str]


class OwnerUser(UnauthenticatedUser):
    """The user of a context the store itself builds to address *owner*'s tasks (the
    SDK's default resolver reads ``user_name``; ours reads it first)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    @property
    def user_name(self) -> str:
        """The owner addressed."""
        return self.owner


class BoundedMemoryTaskStore(InMemoryTaskStore):
    """In-memory ``TaskStore`` with a capacity and a time-to-live for finished tasks.

    Args:
        max_capacity: Tasks kept before finished ones are evicted (at least 1).
        ttl_seconds: How long a finished task is kept after its last save;
            ``None`` or ``<= 0`` keeps finished tasks until capacity forces them out.
        owner_resolver: Maps a call context to the owner key (SDK default: user name).
        clock: Monotonic seconds; injectable for deterministic tests.
    """

    def __init__(
        self,
        max_capacity: int = 10_000,
        ttl_seconds: float | None = 3600.0,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, int):
            raise TypeError("max_capacity must be an integer")
        if max_capacity < 1:
            raise ValueError(f"max_capacity must be at least 1, got {max_capacity}")
        super().__init__(owner_resolver=self.owner_of)
        self.max_capacity = max_capacity
        self._ttl = ttl_seconds if ttl_seconds is not None and ttl_seconds > 0 else None
        self._owner_resolver = owner_resolver
        self._clock = clock
        self._active: set[_Key] = set()
        self._finished: OrderedDict[_Key, float] = OrderedDict()
        #: the finished task ids of each owner, the next to evict first
        self._owned = OwnerQueues()
        self._over_capacity_warned = False
        #: each stored task's context, and each context's owners with their task counts
        #: (storage/contexts.py asks whether a context holds another owner's task)
        self._context_of: dict[_Key, str] = {}
        self._contexts: dict[str, dict[str, int]] = {}
        #: every stored task's place in the lists ``ListTasks`` reads
        self._order = TaskOrder()
        #: awaited with the id of each task forgotten and a context of its owner (what is
        #: kept beside it goes too)
        self.forgetting: list[Callable[[str, ServerCallContext], Awaitable[None]]] = []

    def __len__(self) -> int:
        """Number of tasks currently stored, across all owners."""
        return len(self._active) + len(self._finished)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Store *task* for the caller, making room first if it is new and the store is full."""
        key = (self._owner_resolver(context), task.id)
        now = self._clock()
        await self._expire(now)
        is_new = key not in self._active and key not in self._finished
        if is_new and len(self) >= self.max_capacity:
            await self._make_room()
        await super().save(task, context)
        self._order.put(key[0], task)
        if key not in self._context_of:
            self._context_of[key] = task.context_id
            owners = self._contexts.setdefault(task.context_id, {})
            owners[key[0]] = owners.get(key[0], 0) + 1
        if task.status.state in _TERMINAL:
            self._active.discard(key)
            self._unfinish(key)
            self._finished[key] = now
            self._owned.add(*key)
        else:
            self._unfinish(key)
            self._active.add(key)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The page of the caller's tasks *params* asks for, as the SDK's store answers it,
        at the cost of the page (``InvalidParamsError`` for a page token of the older form
        that names none of the listed tasks)."""
        page = self._order.page(self.owner_of(context), params)
        tasks = []
        for task_id in page.task_ids:
            # The lists change with the tasks, in the same step: every id is found.
            task = await self.get(task_id, context)
            if task is not None:
                tasks.append(task)
        return ListTasksResponse(
            tasks=tasks,
            total_size=page.total_size,
            next_page_token=page.next_page_token,
            page_size=page.page_size,
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Forget the caller's task with this id (no error if it does not exist)."""
        await self._evict((self._owner_resolver(context), task_id))

    def owner_of(self, context: ServerCallContext) -> str:
        """The owner key the store files the caller's tasks under."""
        user = context.user
        return user.owner if isinstance(user, OwnerUser) else self._owner_resolver(context)

    async def others_in(self, context_id: str, owner: str) -> bool:
        """Whether *context_id* holds a task of an owner other than *owner*."""
        owners = self._contexts.get(context_id)
        return owners is not None and any(other != owner for other in owners)

    async def _expire(self, now: float) -> None:
        if self._ttl is None:
            return
        cutoff = now - self._ttl
        while self._finished:
            key, saved_at = next(iter(self._finished.items()))
            if saved_at > cutoff:
                return
            await self._evict(key)

    async def _make_room(self) -> None:
        oldest = self._owned.next_out()
        if oldest is not None:
            await self._evict(oldest)
            return
        if not self._over_capacity_warned:
            self._over_capacity_warned = True
            logger.warning(
                "task store is at capacity (%d) and every stored task is still active; "
                "keeping them all rather than evicting live work",
                self.max_capacity,
            )

    def _unfinish(self, key: _Key) -> None:
        """Forget *key* as a finished task (if it was one)."""
        if self._finished.pop(key, None) is not None:
            self._owned.discard(*key)

    async def _evict(self, key: _Key) -> None:
        owner, task_id = key
        self._order.drop(owner, task_id)
        self._unfinish(key)
        self._active.discard(key)
        context_id = self._context_of.pop(key, None)
        if context_id is not None:
            owners = self._contexts[context_id]
            owners[owner] -= 1
            if not owners[owner]:
                del owners[owner]
                if not owners:
                    del self._contexts[context_id]
        context = ServerCallContext(user=OwnerUser(owner))
        await super().delete(task_id, context)
        for forget in self.forgetting:
            await forget(task_id, context)
