"""The set of stores an agent runs on, and their lifecycle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from a2a.server.cluster import StoredTask, TaskEventStream, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import Task

from .turns import MemoryTurnClaims, TurnClaims

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from ._sql_backend import SqlBackend
    from .quota_slots import SqlQuotaSlots

__all__ = ["Stores"]


@dataclass
class Stores:
    """Everything the request handler needs to keep tasks, plus their lifecycle.

    Attributes:
        task_store: For ``DefaultRequestHandler(task_store=...)``; a
            ``VersionedTaskStore`` in cluster mode.
        push_config_store: Same backend (and database) as the task store, owner-scoped.
        event_stream: Cluster mode only, for ``DefaultRequestHandler(event_stream=...)``.
        engine: The SQLAlchemy engine of SQL stores (``None`` otherwise), for features
            that keep a table of their own next to the tasks.
        turns: Turn claims (see ``turns.py``): in the database in cluster mode.
    """

    task_store: TaskStore | VersionedTaskStore
    push_config_store: PushNotificationConfigStore
    event_stream: TaskEventStream | None = None
    engine: AsyncEngine | None = None
    #: which follow-up continues a parked task (shared by replicas in cluster mode)
    turns: TurnClaims = field(default_factory=MemoryTurnClaims)
    #: events kept for resumable subscriptions: the cluster event stream, or a
    #: :class:`~.event_log.MemoryEventLog` for the other stores (``None``: off)
    event_log: object | None = None
    #: cluster mode: per-caller quota slots shared by all replicas (``quota_slots.py``)
    quota_slots: SqlQuotaSlots | None = None
    _backend: SqlBackend | None = field(default=None, repr=False)

    async def get_task(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task, whichever store kind is in use (unwraps cluster versions)."""
        found = await self.task_store.get(task_id, context)
        return found.task if isinstance(found, StoredTask) else found

    def watch_cancels(self, running: Callable[[], list[str]], stop: Callable[[str], None]) -> None:
        """Cluster mode: stop a local run once another replica has canceled its task.

        *running* lists the task ids executing in this process; *stop* is called with
        one of them when the shared store says it is ``canceled``. No-op otherwise.
        """
        if self._backend is not None and self.event_stream is not None:
            self._backend.watch_cancels(running, stop)

    async def start(self) -> None:
        """Create missing tables, fail tasks a dead process left running, start loops.

        Raises :class:`StoreUnavailableError` when the database cannot be reached.
        """
        if self._backend is not None:
            await self._backend.start()

    async def aclose(self) -> None:
        """Stop background loops and release connections. Safe to call twice."""
        if self._backend is not None:
            await self._backend.aclose()

    async def ping(self) -> None:
        """Cheap liveness probe; raises :class:`StoreUnavailableError` when unreachable."""
        if self._backend is not None:
            await self._backend.ping()
