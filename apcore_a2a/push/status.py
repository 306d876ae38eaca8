"""Delivery status of push configs (``active`` / ``failed``), kept beside the configs.

The A2A ``TaskPushNotificationConfig`` message has no status field, so the status lives
in a :class:`ConfigStatusBook` keyed by ``(task_id, config_id)`` and is merged into the
get/list responses by :mod:`apcore_a2a.push.responses`. Only failures are recorded:
a config without a record is ``active``. Registering a config again (same id) or deleting
it clears its record, which is how a receiver that came back is re-enabled.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig

from apcore_a2a.push._sql import PushTables

__all__ = ["ACTIVE", "FAILED", "ConfigStatusBook", "StatusTrackingConfigStore"]

ACTIVE = "active"
FAILED = "failed"


class ConfigStatusBook:
    """Where failed configs are recorded: in memory, or in SQL when *tables* are given.

    In memory at most *max_tasks* tasks are remembered (oldest failure forgotten first),
    so a long-running process with many dead webhooks does not grow without bound.
    """

    def __init__(self, tables: PushTables | None = None, *, max_tasks: int = 10_000) -> None:
        self._tables = tables
        self._max_tasks = max_tasks
        self._memory: dict[str, dict[str, str]] = {}

    async def failures(self, task_id: str) -> dict[str, str]:
        """``{config_id: reason}`` for the failed configs of a task."""
        if self._tables is not None:
            return await self._tables.failed(task_id)
        return dict(self._memory.get(task_id, {}))

    async def failure(self, task_id: str, config_id: str) -> str | None:
        """Why the config failed, or ``None`` while it is active."""
        return (await self.failures(task_id)).get(config_id)

    async def mark_failed(self, task_id: str, config_id: str, reason: str) -> None:
        if self._tables is not None:
            await self._tables.mark_failed(task_id, config_id, reason)
            return
        configs = self._memory.pop(task_id, {})
        configs[config_id] = reason
        self._memory[task_id] = configs  # re-insert: dict order is the eviction order
        while len(self._memory) > self._max_tasks:
            del self._memory[next(iter(self._memory))]

    async def clear(self, task_id: str, config_id: str | None = None) -> None:
        """Forget the failure of one config, or of every config of the task."""
        if self._tables is not None:
            await self._tables.clear(task_id, config_id)
            return
        if config_id is None:
            self._memory.pop(task_id, None)
            return
        configs = self._memory.get(task_id)
        if configs is not None:
            configs.pop(config_id, None)
            if not configs:
                del self._memory[task_id]


class StatusTrackingConfigStore(PushNotificationConfigStore):
    """A config store that resets the delivery status on (re)registration and deletion.

    Everything else, owner scoping and encryption at rest included, is the wrapped
    store's job.
    """

    def __init__(self, inner: PushNotificationConfigStore, statuses: ConfigStatusBook) -> None:
        self.inner = inner
        self.statuses = statuses

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        stored = await self.inner.set_info(task_id, notification_config, context)
        config_id = stored.id if stored is not None else (notification_config.id or task_id)
        await self.statuses.clear(task_id, config_id)
        return stored

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info(task_id, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info_for_dispatch(task_id)

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self.inner.delete_info(task_id, context, config_id)
        await self.statuses.clear(task_id, config_id)
