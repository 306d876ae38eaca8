"""Caller values a task store must hold, checked before any task exists (issue 40).

A SQL store writes a message's ``contextId`` (and a follow-up's ``taskId``) and the
caller's identity into columns of the SDK's ``tasks`` table. A value a column cannot hold
(longer than it, or with a NUL, which PostgreSQL text refuses) would fail that task's
write after its module ran; so such a request is refused up front, the field named
(JSON-RPC -32602, REST 400, gRPC ``INVALID_ARGUMENT``). The lengths are read from the
SDK's table model, not written here. A NUL or a lone surrogate is refused so whatever the
store (no store holds one: an application's own may be a database of its own). The
caller's owner key is not the caller's to choose: it is kept in the form its column holds
(:func:`hold_owners`), as our own keys are, never refused.

An id a caller names a task, context or push config by (``GetTask``, ``CancelTask``,
``SubscribeToTask``, the push config calls, ``ListTasks`` by ``contextId``) that no store
can hold names nothing: :func:`held_ids` answers it at the request handler, on every
binding and version, before any store (ours or an application's own) is asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, SendMessageRequest
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a.utils.task import decode_page_token, validate_page_size
from google.protobuf.message import Message

from apcore_a2a.edge.keys import HASHED_PREFIX, hashed_key, stored_key, unstorable
from apcore_a2a.upstream.list_timestamps import timestamp_error
from apcore_a2a.upstream.page_tokens import BAD_TOKEN, page_cursor

#: a request handler method ``(self, params, context)``
M = TypeVar("M", bound=Callable[..., Coroutine[Any, Any, Any]])


class StoredFields:
    """The checks for the ``tasks`` table of *store* (``None``: a store without columns,
    whose values are checked only for what no store holds: a NUL, a lone surrogate)."""

    def __init__(self, store: DatabaseTaskStore | None = None) -> None:
        #: column name -> its length (``None``, or no entry: unbounded)
        self._limits: dict[str, int | None] = {}
        if store is not None:
            self._limits = {column: _length(store, column) for column in ("context_id", "id")}

    def check(self, params: SendMessageRequest) -> None:
        """Raise ``InvalidParamsError`` naming the first value the store cannot hold."""
        message = params.message
        self._fits("message.contextId", message.context_id, self._limits.get("context_id"))
        self._fits("message.taskId", message.task_id, self._limits.get("id"))

    @staticmethod
    def _fits(field: str, value: str, limit: int | None) -> None:
        problem = unstorable(value, limit)
        if problem is not None:
            raise InvalidParamsError(message=f"{field} {problem}")


def _length(store: DatabaseTaskStore, column: str) -> int | None:
    """The length of *store*'s ``tasks`` *column* (``None``: unbounded), read from its model."""
    length: int | None = getattr(store.task_model.__table__.c[column].type, "length", None)
    return length


class HeldOwner:
    """An owner resolver whose key is as the store's ``owner`` column holds it
    (:func:`~apcore_a2a.edge.keys.stored_key`, the rule of our own callers' keys).

    An application's own resolver may answer any text, ``sha256:<hex>`` included: such a
    key is hashed too, so it is never the stored form of another caller's key that no
    column holds (which would read that caller's tasks). The SDK's default resolver
    answers our callers' owners, already stored keys (``execution/identity.py`` keeps
    ``sha256:`` for the hashed ones), so they are kept as they are."""

    def __init__(self, resolve: OwnerResolver, limit: int | None) -> None:
        self._resolve = resolve
        self._limit = limit
        self._own = resolve is not resolve_user_scope

    def __call__(self, context: ServerCallContext) -> str:
        key = self._resolve(context)
        if self._own and key.startswith(HASHED_PREFIX):
            return hashed_key(key)
        return stored_key(key, self._limit)


def hold_owners(store: DatabaseTaskStore) -> None:
    """Make *store*'s owner resolver (an application's own, through its public
    ``owner_resolver``) answer keys its ``owner`` column holds, so every operation's
    owner is one stored form: a key with a NUL, a lone surrogate or too long failed each
    read (-32603) of its caller. Once: a store handed to two agents keeps the first one's."""
    if not isinstance(store.owner_resolver, HeldOwner):
        store.owner_resolver = HeldOwner(store.owner_resolver, _length(store, "owner"))


def held_ids(*names: str) -> Callable[[M], M]:
    """A request handler method ``(params, context)`` that answers a request whose field
    *names* holds an id no store can hold (a NUL: PostgreSQL text has none; a lone
    surrogate) as one naming nothing, without asking any store: ``TaskNotFoundError``
    (-32001 / 404 / ``NOT_FOUND``), and ``ListTasks`` by such a ``contextId`` an empty page
    (its page size checked as the SDK checks it); a ``ListTasks`` page token of the SDK's
    forms naming such a task, or a ``statusTimestampAfter`` no ``Timestamp`` holds
    (``upstream/list_timestamps.py``), is invalid params."""

    def wrap(method: M) -> M:
        @functools.wraps(method)
        async def held(self: Any, params: Any, context: ServerCallContext) -> Any:
            listing = isinstance(params, ListTasksRequest)
            if listing and params.page_token:
                _check_token(params.page_token)
            if listing and (bad_time := timestamp_error(params)) is not None:
                raise bad_time
            if not unheld(params, *names):
                return await method(self, params, context)
            if not listing:
                raise TaskNotFoundError
            if params.HasField("page_size"):
                validate_page_size(params.page_size)
            size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
            return ListTasksResponse(page_size=size)

        return cast("M", held)

    return wrap


def unheld(params: Message, *names: str) -> bool:
    """Whether a field of *names* of *params* holds an id no store can hold."""
    return any(unstorable(getattr(params, name)) is not None for name in names)


def _check_token(token: str) -> None:
    """``InvalidParamsError`` for a page *token* in one of the SDK's forms (a cursor, or the
    older base64 task id) whose task id no store can hold; a token of another form is
    its store's to read."""
    cursor = page_cursor(token)  # one no store can read (nested, out of time): refused
    if cursor is not None:
        task_id = cursor.task_id
    else:
        try:
            task_id = decode_page_token(token)
        except InvalidParamsError:
            return
    if unstorable(task_id) is not None:
        raise InvalidParamsError(BAD_TOKEN)
