"""The task store, push-config store and cluster event stream an agent runs on.

``open_stores`` turns the ``task_store`` setting into a :class:`Stores`; the server
factory hands its parts to the SDK's ``DefaultRequestHandler`` and drives its lifecycle
from the app lifespan (``start`` / ``aclose``) and ``/health`` (``ping``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2a.server.tasks import (
    InMemoryPushNotificationConfigStore,
    TaskStore,
)

from ._errors import StoreUnavailableError
from ._set import Stores
from ._urls import parse_store_url
from .event_log import MemoryEventLog
from .memory import BoundedMemoryTaskStore

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL",
    "DEFAULT_REPLICA_TIMEOUT",
    "StoreUnavailableError",
    "Stores",
    "open_stores",
]

#: Seconds between a cluster replica's heartbeats.
DEFAULT_HEARTBEAT_INTERVAL = 2.0
#: Seconds without a heartbeat after which a replica counts as dead.
DEFAULT_REPLICA_TIMEOUT = 10.0
#: Tasks whose recent events the in-process event log keeps (the most recently active).
EVENT_LOG_TASKS = 1000


def open_stores(
    task_store: str | TaskStore,
    settings: Settings,
    *,
    heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
    replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
) -> Stores:
    """Build the stores for *task_store* (a URL or a ``TaskStore``) without any I/O.

    URL forms: ``memory://`` (bounded, see :class:`BoundedMemoryTaskStore`),
    ``sqlite:///path/tasks.db``, ``postgresql://user@host/db`` (``postgres://`` and
    explicit ``+aiosqlite`` / ``+asyncpg`` drivers are accepted; PostgreSQL also takes
    ``?schema=NAME`` and ``?sslmode=...``). A ``TaskStore`` object is used as is, with an
    in-memory push-config store beside it.

    Raises ``ValueError`` for an unusable URL or setting combination.
    """
    stores = _open(task_store, settings, heartbeat_interval, replica_timeout)
    if stores.event_stream is not None:
        stores.event_log = stores.event_stream
    elif settings.task_event_log_size > 0:
        stores.event_log = MemoryEventLog(
            per_task=settings.task_event_log_size, max_tasks=EVENT_LOG_TASKS
        )
    return stores


def _open(
    task_store: str | TaskStore,
    settings: Settings,
    heartbeat_interval: float,
    replica_timeout: float,
) -> Stores:
    if not isinstance(task_store, str):
        if settings.cluster:
            raise ValueError(
                "cluster mode needs a task store URL (sqlite:///... or postgresql://...), "
                "not a TaskStore object"
            )
        return Stores(
            task_store=task_store, push_config_store=InMemoryPushNotificationConfigStore()
        )
    store_url = parse_store_url(task_store)
    if store_url.kind == "memory":
        if settings.cluster:
            raise ValueError(
                "cluster mode needs a shared SQL task store (sqlite:///path.db or "
                "postgresql://user@host/db); memory:// is private to one process"
            )
        return Stores(
            task_store=BoundedMemoryTaskStore(
                max_capacity=settings.task_max_capacity, ttl_seconds=settings.task_ttl_seconds
            ),
            push_config_store=InMemoryPushNotificationConfigStore(),
        )
    from ._sql_open import open_sql_stores
    from .outages import guard_outages, guard_push_outages

    stores = open_sql_stores(
        store_url,
        settings,
        heartbeat_interval=heartbeat_interval,
        replica_timeout=replica_timeout,
    )
    # A database outage answers StoreUnavailableError (retryable), see outages.py.
    stores.task_store = guard_outages(stores.task_store)
    stores.push_config_store = guard_push_outages(stores.push_config_store)
    return stores
