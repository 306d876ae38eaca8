"""A push config registered while another request deletes or registers the same id is
stored, not an internal error.

a2a-sdk 1.3's ``DatabasePushNotificationConfigStore.set_info`` saves with the ORM's
``session.merge``: it reads the row by its key, then updates it or inserts it. A delete of
the row between the two (by another process of a cluster, or in the same one: deletes are
not serialized with registrations) left the update matching no row (SQLAlchemy's
``StaleDataError``), and the same id inserted by another process between them was a
duplicate key (``IntegrityError``): both answered -32603 Internal error. Here the row is
written by one ``INSERT ... ON CONFLICT DO UPDATE`` (PostgreSQL, SQLite), the row as
``session.merge`` would have written it: the last registration wins.
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabasePushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types import TaskPushNotificationConfig
from sqlalchemy import Table

_KEY = ("task_id", "config_id")


class UpsertingConfigStore(DatabasePushNotificationConfigStore):
    """The SDK's SQL config store, writing a config in one statement (module docstring)."""

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        await self._ensure_initialized()
        config = normalize_push_notification_config(task_id, notification_config)
        model = self._to_orm(task_id, config, self.owner_resolver(context))
        table: Table = self.config_model.__table__  # type: ignore[assignment]
        row = {column.name: getattr(model, column.key) for column in table.columns}
        changed = {name: value for name, value in row.items() if name not in _KEY}
        # the dialects are imported as a config is written: an agent without a SQL store
        # never loads them (start-up cost, ``docs/operations.md``)
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects import postgresql

            upsert: Any = postgresql.insert(table).values(row)
        else:  # the other dialect the agent opens
            from sqlalchemy.dialects import sqlite

            upsert = sqlite.insert(table).values(row)
        async with self.engine.begin() as conn:
            await conn.execute(upsert.on_conflict_do_update(index_elements=_KEY, set_=changed))
        return config
