"""A context belongs to the owner of the tasks in it (``docs/auth.md``, *Contexts belong to
their owner*: the rule, what it costs, and the race between processes).

A message that starts a task in a context holding a task of another owner is refused as
invalid params (A2A 1.0.1 §3.4.1) before anything is stored or any module runs; the
answer does not say whose the context is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from sqlalchemy import and_, bindparam, exists, select

from ._urls import index_name

#: The index the SQL check reads (``tasks``: the SDK's table has none on ``context_id``);
#: its third column orders a page of ``ListTasks`` filtered by ``contextId`` (``listing.py``).
INDEX_NAME = index_name("tasks", "context_owner_updated_id")
#: The index this one replaced (``context_id, owner``, a prefix of it): dropped where it
#: exists, one index less to write at every save.
OLD_INDEX_NAME = "ix_apcore_a2a_tasks_context_owner"
#: Whether a context holds a task of an owner other than the one given.
Others = Callable[[str, str], Awaitable[bool]]
REFUSAL = (
    "message.contextId is not available to this caller: omit it to start a new "
    "conversation, or name a context of your own"
)


class ContextGuard:
    """Refuses a new task in a context of another owner (see the module docstring).

    Args:
        others: The store's lookup, ``None`` for a store that cannot tell (a ``TaskStore``
            object of the application's): only this process's open requests count then.
        owner_of: The owner of a call, as the task store resolves it.
    """

    def __init__(self, others: Others | None, owner_of: OwnerResolver) -> None:
        self._others = others
        self._owner_of = owner_of
        #: context -> (owner, its requests under way that start a task in it)
        self._held: dict[str, tuple[str, int]] = {}

    async def enter(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Callable[[], None]:
        """Check *params* (raise ``InvalidParamsError``); the returned function ends the
        request's hold on its context (call it once, when the request ends)."""
        message = params.message
        context_id = message.context_id
        if message.task_id or not context_id:
            return lambda: None
        owner = self._owner_of(context)
        if not self._free(context_id, owner) or (
            self._others is not None and await self._others(context_id, owner)
        ):
            raise InvalidParamsError(message=REFUSAL)
        if not self._free(context_id, owner):  # another request took it during the lookup
            raise InvalidParamsError(message=REFUSAL)
        held = self._held.get(context_id)
        self._held[context_id] = (owner, held[1] + 1 if held else 1)
        return lambda: self._leave(context_id)

    def _free(self, context_id: str, owner: str) -> bool:
        held = self._held.get(context_id)
        return held is None or held[0] == owner

    def _leave(self, context_id: str) -> None:
        owner, count = self._held[context_id]
        if count > 1:
            self._held[context_id] = (owner, count - 1)
        else:
            del self._held[context_id]


def sql_others(store: DatabaseTaskStore) -> Others:
    """The lookup of a SQL store: the first and the last owner of the context in
    :func:`context_index` (the store's start created it where it could), one index entry
    each, however many tasks the context holds.

    The context holds another owner's task if and only if one of the two differs from
    the caller's owner: a ``NULL`` owner sorts first on one end (SQLite ascending,
    PostgreSQL descending). A filter on the owner instead (``IS DISTINCT FROM``) read
    every task of the caller in the context, and PostgreSQL chose to scan the whole
    table for a context holding many. The context is named as a range and kept in the
    order (as ``event_index.py`` does): only this index gives that order, where
    PostgreSQL walked the SDK's ``owner`` index over every task of a context holding
    half the table.
    """
    model = store.task_model
    in_context = and_(
        model.context_id >= bindparam("context_id"), model.context_id <= bindparam("context_id")
    )
    ends = [
        select(model.owner).where(in_context).order_by(*order).limit(1).scalar_subquery()
        for order in (
            (model.context_id.asc(), model.owner.asc()),
            (model.context_id.desc(), model.owner.desc()),
        )
    ]
    stmt = select(*ends, exists().where(in_context))

    async def others(context_id: str, owner: str) -> bool:
        async with store.engine.connect() as conn:
            first, last, any_task = (await conn.execute(stmt, {"context_id": context_id})).one()
            return bool(any_task) and (first != owner or last != owner)

    return others


def context_index(store: DatabaseTaskStore) -> tuple[str, str, str]:
    """(name, table, columns) of the index :func:`sql_others` reads on *store*'s table
    (:data:`INDEX_NAME` on ``tasks``)."""
    table = store.task_model.__tablename__
    return (
        index_name(table, "context_owner_updated_id"),
        table,
        "context_id, owner, last_updated, id",
    )
