"""A bounded in-memory task store (the rules: ``docs/storage.md``, *The memory store is bounded*).

The SDK's ``InMemoryTaskStore`` does the rest; this class decides which tasks to
forget, in O(1) amortized: the owner holding the most finished tasks gives its oldest up
(:class:`OwnerQueues`), so one caller's quick tasks evict its own, never another owner's
before their TTL. It also answers ``ListTasks`` from lists kept in order
(:class:`TaskOrder`) rather than sorting the caller's tasks for every page.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from a2a.auth.user import UnauthenticatedUser
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _TERMINAL
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_page_token, encode_list_tasks_cursor

from apcore_a2a.upstream.page_tokens import BAD_TOKEN, page_cursor

logger = logging.getLogger(__name__)
_Key = tuple[str, str]


# Which of many owners' items a bounded memory structure gives up first: the oldest item
# of the owner holding the most, so one caller's many items replace its own, never those of
# an owner holding fewer. The memory task store files its finished tasks here
# (below), the memory event log its task logs (``event_log.py``).
#
# Every operation is O(1): owners are bucketed by how many items they hold.


class OwnerQueues:
    """Items (task ids) filed per owner, oldest first."""

    def __init__(self) -> None:
        #: owner -> its items, oldest first
        self._owned: dict[str, OrderedDict[str, None]] = {}
        #: number of items -> the owners holding that many, in the order they got there
        #: (a tie gives up the longest holder's item, the same in every process)
        self._holding: dict[int, dict[str, None]] = {}
        self._most = 0

    def add(self, owner: str, item: str) -> None:
        """File *item* under *owner* as its newest (an item already filed moves there)."""
        owned = self._owned.get(owner)
        if owned is None:
            owned = self._owned[owner] = OrderedDict()
        elif item in owned:
            owned.move_to_end(item)
            return
        owned[item] = None
        self._recount(owner, len(owned) - 1, len(owned))

    def discard(self, owner: str, item: str) -> None:
        """Forget *item* of *owner* (if it is filed)."""
        owned = self._owned.get(owner)
        if owned is None or item not in owned:
            return
        del owned[item]
        if not owned:
            del self._owned[owner]
        self._recount(owner, len(owned) + 1, len(owned))

    def next_out(self) -> tuple[str, str] | None:
        """``(owner, item)``: the oldest item of the owner holding the most (``None`` if
        nothing is filed). The caller discards it."""
        if not self._most:
            return None
        owner = next(iter(self._holding[self._most]))
        return owner, next(iter(self._owned[owner]))

    def holds(self, owner: str) -> int:
        """How many items *owner* has filed."""
        return len(self._owned.get(owner, ()))

    def oldest(self, owner: str, *, skip: str) -> str | None:
        """The oldest item of *owner* other than *skip* (``None``: it has no other)."""
        return next((item for item in self._owned.get(owner, ()) if item != skip), None)

    def _recount(self, owner: str, before: int, after: int) -> None:
        """*owner* now holds *after* items instead of *before* (one apart)."""
        if before:
            self._holding[before].pop(owner, None)
            if not self._holding[before]:
                del self._holding[before]
        if after:
            self._holding.setdefault(after, {})[owner] = None
        # Counts move by one, so the largest moves by at most one.
        self._most = max(self._most, after)
        while self._most and self._most not in self._holding:
            self._most -= 1


# How the memory store answers ``ListTasks``: each owner's tasks kept in the list's
# order, so that a page costs its own tasks, not a sort of all of the owner's
# (``docs/storage.md``, *Listing tasks*).
#
# The SDK's ``InMemoryTaskStore.list`` filters and sorts every task of the caller for each
# page (O(n log n) a page, O(n² log n / P) to page through *n* tasks). Here the keys of the
# list's order, ``(has timestamp, timestamp ns, id)`` as the SDK sorts them, are kept in
# sorted lists: one per owner, per owner and context, per owner and state, and per owner,
# context and state, so that each filter the request names has its own list. A page is
# a slice of that list below the page token's position (a bisect); ``statusTimestampAfter``
# is a prefix of the same order (a second bisect), and ``totalSize`` the length between
# the two. Saving a task moves its key in four lists (a bisect and a ``memmove`` each).


#: A task's place in the list, ascending: the list reads it from the end.
Key = tuple[bool, int, str]
#: The lists a task is in: (kind, owner, context or state, ...).
_Group = tuple[object, ...]


class _Entry(NamedTuple):  # a tuple: made and compared on every save, in C
    key: Key
    context_id: str
    state: int


def key_of(task: Task, task_id: str) -> Key:
    """*task*'s (*task_id*'s) sort key, as the SDK orders ``ListTasks``: the key of a cursor
    at *task*."""
    status = task.status
    dated = task.HasField("status") and status.HasField("timestamp")
    timestamp_ns = status.timestamp.ToNanoseconds() if dated else None
    return ListTasksCursor(timestamp_ns, task_id).sort_key()


def _groups(owner: str, entry: _Entry) -> tuple[_Group, ...]:
    return (
        ("owner", owner),
        ("context", owner, entry.context_id),
        ("state", owner, entry.state),
        ("context+state", owner, entry.context_id, entry.state),
    )


class TaskOrder:
    """The stored tasks' keys in the list's order (see the comment above)."""

    def __init__(self) -> None:
        self._lists: dict[_Group, list[Key]] = {}
        self._entries: dict[tuple[str, str], _Entry] = {}

    def put(self, owner: str, task: Task) -> None:
        """Place *owner*'s *task* (new or saved again) in the lists."""
        # Each field read once: a protobuf read makes a new object (4 saves a call).
        task_id = task.id
        entry = _Entry(key_of(task, task_id), task.context_id, task.status.state)
        old = self._entries.get((owner, task_id))
        if old == entry:
            return
        if old is not None:
            self._remove(owner, old)
        self._entries[(owner, task_id)] = entry
        for group in _groups(owner, entry):
            insort(self._lists.setdefault(group, []), entry.key)

    def drop(self, owner: str, task_id: str) -> None:
        """Take *owner*'s task *task_id* out of the lists (nothing if it is not in them)."""
        old = self._entries.pop((owner, task_id), None)
        if old is not None:
            self._remove(owner, old)

    def page(self, owner: str, params: ListTasksRequest) -> tuple[list[str], ListTasksResponse]:
        """The ids of the page of *owner*'s tasks that *params* asks for, in the list's
        order, and the response without its tasks (``InvalidParamsError`` for a page token
        of the older form that names none of the listed tasks)."""
        if params.context_id and params.status:
            group: _Group = ("context+state", owner, params.context_id, params.status)
        elif params.context_id:
            group = ("context", owner, params.context_id)
        elif params.status:
            group = ("state", owner, params.status)
        else:
            group = ("owner", owner)
        keys = self._lists.get(group, [])
        low = 0
        if params.HasField("status_timestamp_after"):
            # Timestamped tasks at or after the instant: the top of the order.
            low = bisect_left(keys, (True, params.status_timestamp_after.ToNanoseconds(), ""))
        high = self._start(owner, keys, low, params.page_token)
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        end = max(low, high - size)
        page = keys[end:high][::-1]
        token = ""
        if end > low:
            dated, timestamp_ns, task_id = page[-1]
            token = encode_list_tasks_cursor(
                ListTasksCursor(timestamp_ns if dated else None, task_id)
            )
        response = ListTasksResponse(
            total_size=len(keys) - low, next_page_token=token, page_size=size
        )
        return [key[2] for key in page], response

    def _start(self, owner: str, keys: list[Key], low: int, token: str) -> int:
        """The index in *keys* above which the page starts (exclusive)."""
        if not token:
            return len(keys)
        cursor = page_cursor(token)
        if cursor is not None:
            return max(low, bisect_left(keys, cursor.sort_key()))
        # The older form names the page's first task, which must be among those listed.
        task_id = decode_page_token(token)
        entry = self._entries.get((owner, task_id))
        if entry is not None:
            at = bisect_left(keys, entry.key)
            if low <= at < len(keys) and keys[at] == entry.key:
                return at + 1
        raise InvalidParamsError(f"{BAD_TOKEN}: {token}")

    def _remove(self, owner: str, entry: _Entry) -> None:
        for group in _groups(owner, entry):
            keys = self._lists[group]
            del keys[bisect_left(keys, entry.key)]
            if not keys:
                del self._lists[group]


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
        ids, page = self._order.page(self.owner_of(context), params)
        for task_id in ids:
            # The lists change with the tasks, in the same step: every id is found.
            task = await self.get(task_id, context)
            if task is not None:
                page.tasks.append(task)
        return page

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
