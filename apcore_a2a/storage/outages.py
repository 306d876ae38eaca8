"""A store outage is a retryable, typed answer, not an internal error.

When the database behind a SQL store cannot be reached (refused, reset, timed out,
restarting), the SDK would answer the caller with a generic internal error. The stores an
agent runs on are wrapped here so such failures raise
:class:`apcore_a2a.errors.StoreUnavailableError` instead: JSON-RPC -32092 with
``retryAfter`` in its data, HTTP 503 with ``Retry-After``, gRPC ``UNAVAILABLE``. Other
database errors (a constraint, a bad query) are not outages and pass unchanged. Nothing
is written twice: the error is raised where the store call failed, and the caller decides
whether to retry.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from a2a.server.tasks import PushNotificationConfigStore
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from apcore_a2a.errors import StoreUnavailableError

__all__ = ["RETRY_AFTER", "UNAVAILABLE", "guard_push_outages", "guarded", "is_outage"]

logger = logging.getLogger(__name__)

#: Seconds a caller is told to wait after an outage (a restart takes a few).
RETRY_AFTER = 2.0
_T = TypeVar("_T")


#: Errors that mean "the database cannot be reached or used right now".
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    OperationalError,
    InterfaceError,
    ConnectionError,
)


def is_outage(exc: BaseException) -> bool:
    """Whether *exc* means the database cannot be reached right now."""
    if isinstance(exc, UNAVAILABLE):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


async def guarded(call: Awaitable[_T]) -> _T:
    """Await *call*, raising ``StoreUnavailableError`` if it failed on an outage."""
    try:
        return await call
    except StoreUnavailableError:
        raise
    except Exception as exc:
        if not is_outage(exc):
            raise
        logger.warning("task store unavailable: %s", type(exc).__name__)
        raise StoreUnavailableError(retry_after=RETRY_AFTER) from None


def guard_push_outages(store: PushNotificationConfigStore) -> PushNotificationConfigStore:
    """A push-config store raising ``StoreUnavailableError`` on outages."""
    return _GuardedPushStore(store)


def _guard(name: str) -> Any:
    async def call(self: _GuardedPushStore, *args: Any, **kwargs: Any) -> Any:
        return await guarded(getattr(self.inner, name)(*args, **kwargs))

    return call


class _GuardedPushStore(PushNotificationConfigStore):
    def __init__(self, inner: PushNotificationConfigStore) -> None:
        self.inner = inner

    set_info = _guard("set_info")
    get_info = _guard("get_info")
    get_info_for_dispatch = _guard("get_info_for_dispatch")
    delete_info = _guard("delete_info")
