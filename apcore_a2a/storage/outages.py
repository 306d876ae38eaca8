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
from typing import TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
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


class _GuardedPushStore(PushNotificationConfigStore):
    def __init__(self, inner: PushNotificationConfigStore) -> None:
        self.inner = inner

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        return await guarded(self.inner.set_info(task_id, notification_config, context))

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await guarded(self.inner.get_info(task_id, context))

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return await guarded(self.inner.get_info_for_dispatch(task_id))

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await guarded(self.inner.delete_info(task_id, context, config_id))
