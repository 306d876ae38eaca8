"""A store outage is a retryable, typed answer, not an internal error.

Failures that mean the database cannot be reached raise
:class:`apcore_a2a.errors.StoreUnavailableError` where the store call failed (nothing is
written twice); other database errors pass unchanged (``docs/storage.md``, *Health*).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

from a2a.server.tasks import PushNotificationConfigStore
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from apcore_a2a.errors import StoreUnavailableError

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
    invalidated = isinstance(exc, DBAPIError) and exc.connection_invalidated
    return isinstance(exc, UNAVAILABLE) or bool(invalidated)


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


class GuardedPushStore(PushNotificationConfigStore):
    """A push-config store raising ``StoreUnavailableError`` on outages."""

    def __init__(self, inner: PushNotificationConfigStore) -> None:
        self.inner = inner

    set_info = _guard("set_info")
    get_info = _guard("get_info")
    get_info_for_dispatch = _guard("get_info_for_dispatch")
    delete_info = _guard("delete_info")
