"""A ``push_notification_configs`` row that holds no config the agent can read costs that
config only: reads pass it by, logged once at WARNING by task and config id, and a ``Get``
of it can tell it from a config that does not exist.

a2a-sdk 1.3's ``DatabasePushNotificationConfigStore`` reads a row by its
``protocol_version``: ``1.0`` as A2A 1.0 JSON, any other value (one no release wrote
included) as 0.3 JSON, whose config id and URL then come from the JSON, not from the row:
such a row was listed under another id and its URL was sent the task's events. A row it
cannot read (JSON its version does not describe, a ciphertext of another key, bytes that
are no ciphertext) it leaves out of lists, logging at ERROR with a traceback whose chained
errors quote the row's content (a pydantic error shows the URL and token), two or three
records on every read of every list and every push; a ``Get`` of it answered "Task not
found". The store exposes no hook for its list reads (``model_to_core_conversion`` errors
are logged there the same way), so its one select (``_select_configs``) is ours.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.models import PushNotificationConfigModel
from a2a.types import TaskPushNotificationConfig
from sqlalchemy import ColumnElement, Table, and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from .push_config_upserts import UpsertingConfigStore
from .unreadable_rows import WarnOnce

logger = logging.getLogger(__name__)

#: The versions a2a-sdk writes (``None``: a row from before the column).
KNOWN_VERSIONS = ("1.0", "0.3", None)


class ReadableConfigStore(UpsertingConfigStore):
    """The SDK's SQL config store, reading each row alone: a row it cannot read is left
    out of every read and logged once (see the module docstring); writing a config in one
    statement (``push_config_upserts.py``)."""

    def __init__(self, engine: AsyncEngine, encryption_key: str | None = None) -> None:
        super().__init__(engine, encryption_key=encryption_key)
        self._warn = WarnOnce(logger)

    async def _select_configs(
        self, *predicates: ColumnElement[bool]
    ) -> list[TaskPushNotificationConfig]:
        models = await self._models(*predicates)
        return [config for model in models if (config := self._read(model)) is not None]

    async def unreadable(self, task_id: str, config_id: str, context: ServerCallContext) -> bool:
        """Whether the caller has a stored config *config_id* of *task_id* that cannot be
        read (a ``Get`` of it answers so, not that it does not exist)."""
        models = await self._models(
            self.config_model.task_id == task_id,
            self.config_model.config_id == config_id,
            self.config_model.owner == self.owner_resolver(context),
        )
        return any(self._read(model) is None for model in models)

    async def stored_config_ids(self, task_id: str) -> set[str]:
        """The ids of every config row *task_id* holds, of every owner, readable or not
        (the cap counts rows: a row left out of lists is stored all the same)."""
        rows = await self._models(self.config_model.task_id == task_id)
        return {row.config_id for row in rows}

    async def with_records(
        self, task_id: str, tables: Sequence[Table]
    ) -> list[tuple[TaskPushNotificationConfig, tuple[Any, ...]]]:
        """The configs ``get_info_for_dispatch`` reads, each with what each of *tables*
        (keyed by ``task_id`` and ``config_id``) holds for it in its third column, or
        ``None``: one statement, so a config and its records are read as of one moment."""
        model = self.config_model
        query = select(model, *(table.columns[2] for table in tables))
        for t in tables:
            query = query.outerjoin(
                t, and_(t.c.task_id == model.task_id, t.c.config_id == model.config_id)
            )
        rows = await self._rows(query.where(model.task_id == task_id))
        read = ((self._read(row[0]), tuple(row[1:])) for row in rows)
        return [(config, values) for config, values in read if config is not None]

    async def _models(self, *predicates: ColumnElement[bool]) -> list[PushNotificationConfigModel]:
        rows = await self._rows(select(self.config_model).where(and_(*predicates)))
        return [row[0] for row in rows]

    async def _rows(self, query: Any) -> list[Any]:
        await self._ensure_initialized()
        async with self.async_session_maker() as session:
            return list((await session.execute(query)).all())

    def _read(self, model: PushNotificationConfigModel) -> TaskPushNotificationConfig | None:
        try:
            config = self._parse(model)
        except Exception as exc:  # the reading is pure: whatever it raises is about the row
            self._log(model, type(exc).__name__)
            return None
        # Empty ids default to the row's, as the SDK's stores default them on writing.
        config.id = config.id or model.config_id
        config.task_id = config.task_id or model.task_id
        if config.id != model.config_id or config.task_id != model.task_id:
            # Another config's data: its URL must not be sent this task's events.
            self._log(model, "its data names another config")
            return None
        return config

    def _parse(self, model: PushNotificationConfigModel) -> TaskPushNotificationConfig:
        if model.protocol_version not in KNOWN_VERSIONS:
            raise LookupError("unknown protocol_version")
        data = model.config_data
        if self._fernet is not None:
            from cryptography.fernet import InvalidToken

            # A row stored before the key was set is plain JSON, as the SDK reads it.
            with contextlib.suppress(InvalidToken):
                data = self._fernet.decrypt(data)
        return self._parse_config(data.decode(), model.task_id, model.protocol_version)

    def _log(self, model: PushNotificationConfigModel, what: str) -> None:
        # The ids and what failed, never the row's content (its URL and token are secrets).
        self._warn(
            (model.task_id, model.config_id),
            "task %s, push config %s: its stored row cannot be read as a push config "
            "(protocol_version %.16r, %s); the row is left as it is, not listed and not "
            "sent events, and its owner can delete it",
            model.task_id,
            model.config_id,
            model.protocol_version,
            what,
        )
