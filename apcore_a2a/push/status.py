"""What the agent keeps about each push config beside it: delivery status and version.

The A2A ``TaskPushNotificationConfig`` message has neither a status nor the protocol
version it was registered under, so both live in a :class:`ConfigStatusBook` keyed by
``(task_id, config_id)``:

* status: only failures are recorded; a config without a record is ``active``. The
  record is merged into get/list answers by :mod:`apcore_a2a.push.responses`.
  Registering a config again (same id) or deleting it clears it, which is how a receiver
  that came back is re-enabled.
* version: only configs registered under protocol 0.3 have a record; every other config
  is delivered as 1.0 (see :mod:`apcore_a2a.push.bodies`).

In memory, or in SQL tables beside the configs when the task store is SQL.
"""

from __future__ import annotations

from apcore_a2a.push._sql import PushTables

__all__ = ["ACTIVE", "DEFAULT_VERSION", "FAILED", "ConfigStatusBook"]

ACTIVE = "active"
FAILED = "failed"
#: The protocol version of a config that has no version record.
DEFAULT_VERSION = "1.0"

_Records = dict[str, dict[str, str]]


def _remember(records: _Records, task_id: str, config_id: str, value: str, limit: int) -> None:
    configs = records.pop(task_id, {})
    configs[config_id] = value
    records[task_id] = configs  # re-insert: dict order is the eviction order
    while len(records) > limit:
        del records[next(iter(records))]


def _forget(records: _Records, task_id: str, config_id: str | None) -> None:
    if config_id is None:
        records.pop(task_id, None)
        return
    configs = records.get(task_id)
    if configs is not None:
        configs.pop(config_id, None)
        if not configs:
            del records[task_id]


class ConfigStatusBook:
    """Failures and protocol versions of push configs, in memory or in SQL (*tables*).

    In memory at most *max_tasks* tasks are remembered per kind of record (the task
    touched least recently is forgotten first), so a long-running process with many dead
    webhooks does not grow without bound.
    """

    def __init__(self, tables: PushTables | None = None, *, max_tasks: int = 10_000) -> None:
        self._tables = tables
        self._max_tasks = max_tasks
        self._failures: _Records = {}
        self._versions: _Records = {}

    # -- delivery status ---------------------------------------------------------------
    async def failures(self, task_id: str) -> dict[str, str]:
        """``{config_id: reason}`` for the failed configs of a task."""
        if self._tables is not None:
            return await self._tables.failed(task_id)
        return dict(self._failures.get(task_id, {}))

    async def failure(self, task_id: str, config_id: str) -> str | None:
        """Why the config failed, or ``None`` while it is active."""
        return (await self.failures(task_id)).get(config_id)

    async def mark_failed(self, task_id: str, config_id: str, reason: str) -> None:
        """Record that deliveries to this config stopped, and why."""
        if self._tables is not None:
            await self._tables.mark_failed(task_id, config_id, reason)
            return
        _remember(self._failures, task_id, config_id, reason, self._max_tasks)

    async def clear(self, task_id: str, config_id: str | None = None) -> None:
        """Forget the failure of one config, or of every config of the task."""
        if self._tables is not None:
            await self._tables.clear(task_id, config_id)
            return
        _forget(self._failures, task_id, config_id)

    # -- protocol version --------------------------------------------------------------
    async def versions(self, task_id: str) -> dict[str, str]:
        """``{config_id: version}`` for the configs of a task not registered under 1.0."""
        if self._tables is not None:
            return await self._tables.versions(task_id)
        return dict(self._versions.get(task_id, {}))

    async def set_version(self, task_id: str, config_id: str, version: str) -> None:
        """Record the protocol version a config was (re)registered under."""
        if self._tables is not None:
            await self._tables.set_version(
                task_id, config_id, None if version == DEFAULT_VERSION else version
            )
            return
        if version == DEFAULT_VERSION:
            _forget(self._versions, task_id, config_id)
        else:
            _remember(self._versions, task_id, config_id, version, self._max_tasks)

    async def forget(self, task_id: str, config_id: str | None = None) -> None:
        """Drop every record of one config, or of every config of the task (deletion)."""
        await self.clear(task_id, config_id)
        if self._tables is not None:
            await self._tables.forget_versions(task_id, config_id)
            return
        _forget(self._versions, task_id, config_id)
