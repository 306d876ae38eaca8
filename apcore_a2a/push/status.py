"""What the agent keeps about each push config beside it: delivery status and version.

The A2A ``TaskPushNotificationConfig`` has neither, so a :class:`ConfigStatusBook` keeps
them per ``(task_id, config_id)``, in memory or in SQL beside the configs. Only failures
are recorded (no record: ``active``; :mod:`~apcore_a2a.push.responses` shows it), cleared
when the config is registered again or deleted (how a receiver that came back is
re-enabled); only non-1.0 versions are recorded (:mod:`~apcore_a2a.push.bodies`).
"""

from __future__ import annotations

from typing import Protocol

from apcore_a2a.push._sql import PushTables

__all__ = ["ACTIVE", "DEFAULT_VERSION", "FAILED", "ConfigStatusBook"]

ACTIVE = "active"
FAILED = "failed"
#: The protocol version of a config that has no version record.
DEFAULT_VERSION = "1.0"


class _Records(Protocol):
    async def read(self, task_id: str) -> dict[str, str]: ...
    async def put(self, task_id: str, config_id: str, value: str) -> None: ...
    async def drop(self, task_id: str, config_id: str | None) -> None: ...


class _MemoryRecords:
    """``ConfigRecords`` in memory, for the *limit* tasks touched most recently."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._tasks: dict[str, dict[str, str]] = {}

    async def read(self, task_id: str) -> dict[str, str]:
        return dict(self._tasks.get(task_id, {}))

    async def put(self, task_id: str, config_id: str, value: str) -> None:
        configs = self._tasks.pop(task_id, {})
        configs[config_id] = value
        self._tasks[task_id] = configs  # re-insert: dict order is the eviction order
        while len(self._tasks) > self._limit:
            del self._tasks[next(iter(self._tasks))]

    async def drop(self, task_id: str, config_id: str | None) -> None:
        configs = self._tasks.get(task_id, {})
        if config_id is not None:
            configs.pop(config_id, None)
        if config_id is None or not configs:
            self._tasks.pop(task_id, None)


class ConfigStatusBook:
    """Failures and protocol versions of push configs, in SQL (*tables*) or in memory
    (at most *max_tasks* tasks per kind, so many dead webhooks cannot grow it unbounded)."""

    def __init__(self, tables: PushTables | None = None, *, max_tasks: int = 10_000) -> None:
        self._failures: _Records = tables.failures if tables else _MemoryRecords(max_tasks)
        self._versions: _Records = tables.versions if tables else _MemoryRecords(max_tasks)

    async def failures(self, task_id: str) -> dict[str, str]:
        """``{config_id: reason}`` for the failed configs of a task."""
        return await self._failures.read(task_id)

    async def failure(self, task_id: str, config_id: str) -> str | None:
        """Why the config failed, or ``None`` while it is active."""
        return (await self.failures(task_id)).get(config_id)

    async def mark_failed(self, task_id: str, config_id: str, reason: str) -> None:
        """Record that deliveries to this config stopped, and why."""
        await self._failures.put(task_id, config_id, reason)

    async def clear(self, task_id: str, config_id: str | None = None) -> None:
        """Forget the failure of one config, or of every config of the task."""
        await self._failures.drop(task_id, config_id)

    async def versions(self, task_id: str) -> dict[str, str]:
        """``{config_id: version}`` for the configs of a task not registered under 1.0."""
        return await self._versions.read(task_id)

    async def set_version(self, task_id: str, config_id: str, version: str) -> None:
        """Record the protocol version a config was (re)registered under."""
        if version == DEFAULT_VERSION:
            await self._versions.drop(task_id, config_id)
        else:
            await self._versions.put(task_id, config_id, version)

    async def forget(self, task_id: str, config_id: str | None = None) -> None:
        """Drop every record of one config, or of every config of the task (deletion)."""
        await self.clear(task_id, config_id)
        await self._versions.drop(task_id, config_id)
