"""How ``ListTasks`` reads a page of a caller's tasks from a SQL store: from an index, in
the order of the list, starting at the page token (``docs/storage.md``, *Listing tasks*).

The SDK's ``DatabaseTaskStore.list`` orders by an expression (tasks without a timestamp
last) that no index holds, and names the page token's position as an ``OR`` no index
range answers: PostgreSQL read all of the caller's tasks and sorted them for every page,
twice with the count (2,000 rows a page at 1,000 tasks; paging to the end read the
table once per page). Here the same order and the same page tokens are two index ranges:
the timestamped tasks (newest first) through ``owner, last_updated`` (the SDK's index;
``context_id, owner, last_updated, id`` under a ``contextId`` filter, ``contexts.py``), then
those without a timestamp by id; under a ``status`` filter ``owner, <state>, last_updated,
id`` (:data:`STATE_INDEX_NAME`), whose state is the 1.0 name of the stored one (rows an
older agent wrote hold the 0.3 value: ``completed`` for ``TASK_STATE_COMPLETED``), so
that both spellings are one range of the index in the list's order. A page reads its
rows and the one after it; ``totalSize`` is a count over the same index, which
PostgreSQL answers from the index alone on the pages autovacuum marked all-visible
(except under a ``status`` filter: it reads the matching rows, PostgreSQL does not read
an expression from an index).

A page names its position as a row comparison, ``(last_updated, id) < (:t, :i)`` (one
range of the context and status indexes), and on PostgreSQL reads with sorting turned off
for its transaction (``enable_sort``): its plan is then an index's order from the position
on, stopped at the page's end (the SDK's index: by timestamp, tasks sharing one sorted
among themselves), whatever the planner expects of the values. Otherwise the first plans
of a statement on a new connection (custom plans, estimated from the values; the pool
opens connections under load) expected 16 of the caller's 1,949 tasks past the position,
and read and sorted all of them for each page until the cached generic plan took over
(``tests/storage/test_list_pages_e2e.py``).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_task_status
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState, TaskStatus
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_page_token, encode_list_tasks_cursor
from sqlalchemy import String, and_, func, literal_column, select, text, tuple_

from apcore_a2a.errors import TaskUnreadableError
from apcore_a2a.upstream.page_tokens import BAD_TOKEN, page_cursor
from apcore_a2a.upstream.sql_task_rows import TaskRows

from ._urls import index_covers, index_name, index_sql, raced
from .contexts import context_index
from .outages import DB_ERRORS, reason

logger = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1)
#: The index a page filtered by ``status`` reads on ``tasks`` (see the module docstring).
#: A database keeps the expression it was built with: another :func:`state_sql` needs
#: another name.
STATE_INDEX_NAME = index_name("tasks", "owner_state_updated_id")
#: A page's order is its index's, never a sort (PostgreSQL; see the module docstring).
_NO_SORT = text("SELECT set_config('enable_sort', 'off', true)")
#: Each state's stored 0.3 value and its 1.0 name, where they differ.
_OLD_NAMES = [
    (to_compat_task_status(TaskStatus(state=state)).state.value, TaskState.Name(state))
    for state in TaskState.values()
]
#: SQL of the stored state, per dialect (the key as a literal: an index holds only that).
_RAW_STATE = {"postgresql": "(status ->> 'state')", "sqlite": "json_extract(status, '$.state')"}


def state_sql(dialect: str) -> str:
    """SQL of a task row's state as A2A 1.0 names it, in *dialect*: the expression of
    :data:`STATE_INDEX_NAME`, which a query must spell the same to read that index."""
    raw = _RAW_STATE[dialect]
    whens = " ".join(f"WHEN '{old}' THEN '{name}'" for old, name in _OLD_NAMES if old != name)
    return f"CASE {raw} {whens} ELSE {raw} END"


def state_index(store: DatabaseTaskStore) -> tuple[str, str, str]:
    """(name, table, columns) of the index a page filtered by ``status`` reads on
    *store*'s table (:data:`STATE_INDEX_NAME` on ``tasks``)."""
    table = store.task_model.__tablename__
    columns = f"owner, ({state_sql(store.engine.dialect.name)}), last_updated, id"
    return index_name(table, "owner_state_updated_id"), table, columns


def pages_of(store: DatabaseTaskStore) -> TaskStore:
    """An application's own *store*, whose ``ListTasks`` pages are :class:`TaskPages` (an
    unreadable row is left out of its page, not failing it) where they can be: the SDK's
    ``list`` (not a subclass's) on SQLite or PostgreSQL. Otherwise *store* as it is."""
    if (
        type(store).list is not DatabaseTaskStore.list
        or store.engine.dialect.name not in _RAW_STATE
    ):
        return store
    return _PagedStore(store)


class _PagedStore(TaskStore):
    def __init__(self, store: DatabaseTaskStore) -> None:
        self._store = store
        self._pages = TaskPages(store)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._store.save(task, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self._store.get(task_id, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._store.delete(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        await self._store.initialize()  # the SDK's list creates the table as its other calls do
        return await self._pages.list(params, context)


def _ns(value: datetime) -> int:
    """Nanoseconds since the epoch of a stored (naive UTC) ``last_updated``, as the
    SDK's page tokens carry it."""
    delta = value.replace(tzinfo=None) - _EPOCH
    return (delta // timedelta(microseconds=1)) * 1000


def _at(timestamp_ns: int) -> datetime:
    """The stored ``last_updated`` of a cursor's time (one a ``Timestamp`` holds:
    ``page_cursor`` refuses the others)."""
    return _EPOCH + timedelta(microseconds=timestamp_ns // 1000)


class TaskPages:
    """``ListTasks`` of a SQL store, with the SDK's order, filters and page tokens."""

    def __init__(self, store: DatabaseTaskStore) -> None:
        self._db = store
        self._model = store.task_model
        self._rows = TaskRows(store)
        self._state = literal_column(state_sql(store.engine.dialect.name), String)
        self._postgres = store.engine.dialect.name == "postgresql"

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The page of *params* of the caller's tasks (``InvalidParamsError`` for a page
        token that names no position of this caller's list)."""
        m = self._model
        owner = self._db.owner_resolver(context)
        where = [m.owner == owner, *self._filters(params)]
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        async with self._db.async_session_maker() as session:
            if self._postgres:  # for this transaction only (see the module docstring)
                await session.execute(_NO_SORT)
            cursor, inclusive = await self._position(session, owner, params.page_token)
            rows: builtins.list[Any] = []
            # Both in the indexes' order (last_updated is NULL for every undated row).
            order = (m.last_updated.desc(), m.id.desc())
            if cursor is None or cursor.timestamp_ns is not None:
                after: builtins.list[Any] = [m.last_updated.is_not(None)]
                if cursor is not None and cursor.timestamp_ns is not None:
                    key = tuple_(m.last_updated, m.id)
                    at = tuple_(_at(cursor.timestamp_ns), cursor.task_id)
                    after.append(key <= at if inclusive else key < at)
                stmt = select(m).where(*where, *after).order_by(*order).limit(size + 1)
                rows = list((await session.execute(stmt)).scalars())
            if len(rows) <= size and not params.HasField("status_timestamp_after"):
                undated: builtins.list[Any] = [m.last_updated.is_(None)]
                if cursor is not None and cursor.timestamp_ns is None:
                    beyond = m.id <= cursor.task_id if inclusive else m.id < cursor.task_id
                    undated.append(beyond)
                stmt = select(m).where(*where, *undated).order_by(*order)
                rows += list((await session.execute(stmt.limit(size + 1 - len(rows)))).scalars())
            count = select(func.count()).select_from(m).where(*where)
            total = (await session.execute(count)).scalar_one()
        page = rows[:size]
        token = ""
        if len(rows) > size:
            last = page[-1].last_updated
            position = ListTasksCursor(_ns(last) if last is not None else None, page[-1].id)
            token = encode_list_tasks_cursor(position)
        tasks = []
        for row in page:
            # An unreadable row (logged by the store's reader) is left out of the page
            # only: the token is still the last row's position, the count still counts it.
            with contextlib.suppress(TaskUnreadableError):
                tasks.append(self._rows.task(row))
        return ListTasksResponse(
            tasks=tasks, total_size=total, next_page_token=token, page_size=size
        )

    def _filters(self, params: ListTasksRequest) -> builtins.list[Any]:
        m = self._model
        out: builtins.list[Any] = []
        if params.context_id:  # one no store holds never gets here (fields.held_ids)
            out.append(m.context_id == params.context_id)
        if params.status:
            out.append(self._state == TaskState.Name(params.status))
        if params.HasField("status_timestamp_after"):
            out.append(m.last_updated >= params.status_timestamp_after.ToDatetime())
        return out

    async def _position(
        self, session: Any, owner: str, token: str
    ) -> tuple[ListTasksCursor | None, bool]:
        """Where the page starts: (the position, whether the page includes it). A token
        of the SDK's older form names the first task of the page, which must be one of
        the caller's (so that no token tells whether another caller's task exists)."""
        if not token:
            return None, False
        cursor = page_cursor(token)
        # decode_page_token: InvalidParamsError if not even the older form
        task_id = cursor.task_id if cursor is not None else decode_page_token(token)
        if cursor is not None:
            return cursor, False
        m = self._model
        stmt = select(m.last_updated).where(and_(m.id == task_id, m.owner == owner))
        found = (await session.execute(stmt)).one_or_none()
        if found is None:
            raise InvalidParamsError(f"{BAD_TOKEN}: {token}")
        stamp = found[0]
        return ListTasksCursor(_ns(stamp) if stamp is not None else None, task_id), True


# The start of an agent on an application's own ``TaskStore`` object (``docs/storage.md``,
# *Your own task store*): what it does not get, said once, and the indexes the agent's reads
# of an a2a-sdk ``DatabaseTaskStore`` use, where the agent may create them.
#
# Restart recovery and retention stay with the stores the agent opens from a URL: those it
# holds alone or with its own replicas (``_owner.py``), where a task left ``working`` can only
# be one a dead process of this agent ran. An application's table may be shared with another
# agent or with the application's own code, whose running tasks a recovery would fail and
# whose finished ones a purge would delete.
_DOCS = "docs/storage.md, *Your own task store*"

#: how long a PostgreSQL index build waits for the application's open writes on its table
LOCK_WAIT = "1s"


async def start_own_store(store: TaskStore, *, paged: bool, retention_seconds: float) -> None:
    """Log what *store* does not get; on a ``DatabaseTaskStore`` that creates its own table,
    create it and the indexes of the context check and (where the agent pages its
    ``ListTasks``: *paged*) of a page filtered by ``status``, logging a failure instead of
    failing the start: every read works without them, only slower."""
    retention = f"; task_retention_seconds={retention_seconds:g} deletes none of its tasks"
    retention = retention if retention_seconds > 0 else ""
    level = logging.WARNING if retention else logging.INFO
    kind = type(store).__name__
    if not isinstance(store, DatabaseTaskStore):
        if retention:
            logger.log(level, "task store: the application's own %s%s (%s)", kind, retention, _DOCS)
        return
    table = store.task_model.__tablename__
    logger.log(
        level,
        "task store: the application's own %s (table %r): tasks a crash left submitted or "
        "working stay so, as another process sharing the table may be running them%s; a "
        "task_store URL gets restart recovery and retention (%s)",
        *(kind, table, retention, _DOCS),
    )
    if store.engine.dialect.name not in ("sqlite", "postgresql"):
        return  # the indexes' SQL is theirs (MySQL has no CREATE INDEX IF NOT EXISTS)
    indexes = [context_index(store)] + [state_index(store)] * paged
    statements = "; ".join(index_sql(store.engine.dialect, *index) for index in indexes)
    if not store.create_table:
        logger.info(
            "task store: the application creates its table %r itself (create_table=False), "
            "so the agent adds no index to it; for its lists and context checks add: %s",
            *(table, statements),
        )
        return

    try:
        await raced(store.initialize)  # other agents may be starting on the table too
    except DB_ERRORS as exc:
        # Not fatal: the store tries again at each call (rights granted, the database up).
        logger.error(
            "task store: could not create the application's table %r (%s); every call on a "
            "task fails until it exists",
            *(table, reason(exc)),
        )
        return

    others: dict[str, str] = {}  # name: what the index of that name covers instead

    async def create() -> None:
        others.clear()
        for name, _table, columns in indexes:  # each on its own: one the rows refuse costs itself
            async with store.engine.begin() as conn:
                # Building an index waits for every open write on the table, and every
                # write queued meanwhile waits for it: one the table has is left alone, and
                # a PostgreSQL build gives up after LOCK_WAIT (the next start tries again).
                covers = await index_covers(conn, name, table, columns)
                if covers is not None:
                    if covers:
                        others[name] = covers
                    continue
                if conn.dialect.name == "postgresql":
                    await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'"))
                await conn.execute(text(index_sql(conn.dialect, name, table, columns)))

    try:
        await raced(create)  # other agents may be starting on the table too
    except DB_ERRORS as exc:
        logger.warning(
            "task store: could not create the indexes of the application's table %r (%s); "
            "its lists and context checks read the caller's tasks until they exist: %s",
            *(table, reason(exc), statements),
        )
        return
    for name, _table, columns in indexes:
        if name in others:  # an index the agent did not make is the application's to change
            logger.warning(
                "task store: index %s covers %s, not %s (%s): the application's table %r is "
                "read without it (lists and context checks read the caller's tasks); drop or "
                "rename that index and restart, and the agent creates its own (%s)",
                *(name, others[name], table, columns, table, _DOCS),
            )
    if read := [index[0] for index in indexes if index[0] not in others]:
        logger.info(
            "task store: the application's table %r reads the indexes %s",
            *(table, ", ".join(read)),
        )
