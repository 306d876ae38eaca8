"""A store outage is a retryable, typed answer, not an internal error.

Failures that mean the database cannot be reached raise
:class:`apcore_a2a.errors.StoreUnavailableError` where the store call failed (nothing is
written twice); other database errors pass unchanged (``docs/storage.md``, *Health*).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from sqlalchemy import Table
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from apcore_a2a.errors import StoreUnavailableError

logger = logging.getLogger(__name__)

#: Seconds a caller is told to wait after an outage (a restart takes a few).
RETRY_AFTER = 2.0
_T = TypeVar("_T")


#: Errors that mean "the database cannot be reached or used right now".
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # also TimeoutError and ConnectionError
    OperationalError,
    InterfaceError,
    PoolTimeout,  # every pooled connection busy for the pool's whole timeout
)


#: What a start step or a probe reports as the store's failure (any other error propagates).
DB_ERRORS: tuple[type[BaseException], ...] = (*UNAVAILABLE, DBAPIError)

#: SQLSTATE classes of a server that cannot take (more) work now: connection exceptions,
#: insufficient resources (``too many connections for role``/``for database``), shutdown.
_BUSY_STATES = ("08", "53", "57P")


def is_outage(exc: BaseException) -> bool:
    """Whether *exc* means the database cannot be reached (or take a connection) now."""
    if isinstance(exc, UNAVAILABLE):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    return exc.connection_invalidated or sqlstate(exc).startswith(_BUSY_STATES)


def sqlstate(exc: DBAPIError) -> str:
    """The SQLSTATE of the server's error behind *exc* (``""`` if it carries none)."""
    cause = exc.orig
    state = getattr(cause, "sqlstate", None) or getattr(
        getattr(cause, "__cause__", None), "sqlstate", ""
    )
    return str(state or "")


def reason(exc: BaseException) -> str:
    """*exc* in one short line: the database's error class and the first line of its text."""
    error = getattr(exc, "orig", None) or exc
    detail = str(error).splitlines()[0][:200] if str(error) else ""
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


async def guarded(call: Awaitable[_T]) -> _T:
    """Await *call*, raising ``StoreUnavailableError`` if it failed on an outage."""
    try:
        return await call
    except Exception as exc:  # our StoreUnavailableError is no outage type: passes as is
        if not is_outage(exc):
            raise
        logger.warning("task store unavailable: %s", type(exc).__name__)
        raise StoreUnavailableError(retry_after=RETRY_AFTER) from None


def _guard(name: str) -> Any:
    async def call(self: GuardedPushStore, *args: Any, **kwargs: Any) -> Any:
        return await guarded(getattr(self.inner, name)(*args, **kwargs))

    return call


@runtime_checkable
class ConfigRows(Protocol):
    """A SQL push-config store's rows, a row its lists leave out included (every config id
    of a task; whether one is unreadable: ``upstream/unreadable_push_configs.py``), and its
    configs read with records of ours beside them (``with_records``)."""

    async def stored_config_ids(self, task_id: str) -> set[str]: ...

    async def unreadable(
        self, task_id: str, config_id: str, context: ServerCallContext
    ) -> bool: ...

    async def with_records(
        self, task_id: str, tables: Sequence[Table]
    ) -> list[tuple[TaskPushNotificationConfig, tuple[Any, ...]]]: ...


class GuardedPushStore(PushNotificationConfigStore):
    """The SQL push-config store raising ``StoreUnavailableError`` on outages, in the
    SDK's methods and :class:`ConfigRows`' alike."""

    def __init__(self, inner: PushNotificationConfigStore) -> None:
        self.inner = inner

    set_info = _guard("set_info")
    stored_config_ids = _guard("stored_config_ids")
    unreadable = _guard("unreadable")
    with_records = _guard("with_records")
    get_info = _guard("get_info")
    get_info_for_dispatch = _guard("get_info_for_dispatch")
    delete_info = _guard("delete_info")
