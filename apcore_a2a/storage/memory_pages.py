"""How the memory store answers ``ListTasks``: each owner's tasks kept in the list's
order, so that a page costs its own tasks, not a sort of all of the owner's
(``docs/storage.md``, *Listing tasks*).

The SDK's ``InMemoryTaskStore.list`` filters and sorts every task of the caller for each
page (O(n log n) a page, O(n² log n / P) to page through *n* tasks). Here the keys of the
list's order, ``(has timestamp, timestamp ns, id)`` as the SDK sorts them, are kept in
sorted lists: one per owner, per owner and context, per owner and state, and per owner,
context and state, so that each filter the request names has its own list. A page is
a slice of that list below the page token's position (a bisect); ``statusTimestampAfter``
is a prefix of the same order (a second bisect), and ``totalSize`` the length between
the two. Saving a task moves its key in four lists (a bisect and a ``memmove`` each).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import NamedTuple

from a2a.types import ListTasksRequest, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_page_token, encode_list_tasks_cursor

from apcore_a2a.upstream.page_tokens import BAD_TOKEN, page_cursor

#: A task's place in the list, ascending: the list reads it from the end.
Key = tuple[bool, int, str]
#: The lists a task is in: (kind, owner, context or state, ...).
_Group = tuple[object, ...]


class _Entry(NamedTuple):  # a tuple: made and compared on every save, in C
    key: Key
    context_id: str
    state: int


@dataclass(frozen=True)
class Page:
    """The ids of one page of tasks, in the list's order, with what the response says."""

    task_ids: list[str]
    total_size: int
    next_page_token: str
    page_size: int


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
    """The stored tasks' keys in the list's order (see the module docstring)."""

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

    def page(self, owner: str, params: ListTasksRequest) -> Page:
        """The page of *owner*'s tasks that *params* asks for (``InvalidParamsError`` for
        a page token of the older form that names none of the listed tasks)."""
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
        ids = [key[2] for key in page]
        return Page(ids, len(keys) - low, token, size)

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
