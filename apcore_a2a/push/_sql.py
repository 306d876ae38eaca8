"""SQL tables owned by the push package: signing key, failed configs, config versions.

They live in the same database as the tasks and push configs (the engine the storage
layer opened), so a generated key survives restarts and is shared by every replica, a
config marked ``failed`` reads ``failed`` on every replica, and a config registered by a
0.3 client is delivered in the 0.3 shape whichever replica sends it, after restarts too.
"""

from __future__ import annotations

import time

from sqlalchemy import (
    Column,
    ColumnElement,
    Float,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["PushTables"]

_metadata = MetaData()

signing_keys = Table(
    "apcore_a2a_push_signing_keys",
    _metadata,
    Column("kid", String(64), primary_key=True),
    Column("key_data", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

failed_configs = Table(
    "apcore_a2a_push_failed_configs",
    _metadata,
    Column("task_id", String(255), primary_key=True),
    Column("config_id", String(255), primary_key=True),
    Column("reason", Text, nullable=False),
    Column("failed_at", Float, nullable=False),
)

# Only configs registered under another protocol version than 1.0 have a row: configs
# stored before this table existed, and all 1.0 ones, read as 1.0.
config_versions = Table(
    "apcore_a2a_push_config_versions",
    _metadata,
    Column("task_id", String(255), primary_key=True),
    Column("config_id", String(255), primary_key=True),
    Column("protocol_version", String(16), nullable=False),
)


class PushTables:
    """Async access to the push tables on *engine* (created on :meth:`initialize`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def initialize(self) -> None:
        # Processes starting together (``workers``) race to create a table; PostgreSQL
        # fails the loser's CREATE on pg_type's unique index: a second pass finds it made.
        for attempt in range(3):
            try:
                async with self.engine.begin() as conn:
                    await conn.run_sync(_metadata.create_all)
                return
            except (IntegrityError, ProgrammingError):
                if attempt == 2:
                    raise

    # -- signing key -------------------------------------------------------------------
    async def first_key(self) -> str | None:
        """The oldest stored key, so that racing replicas all settle on the same one."""
        query = (
            select(signing_keys.c.key_data)
            .order_by(signing_keys.c.created_at, signing_keys.c.kid)
            .limit(1)
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else str(row[0])

    async def add_key(self, kid: str, key_data: str) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    insert(signing_keys).values(kid=kid, key_data=key_data, created_at=time.time())
                )
        except IntegrityError:
            pass  # another replica stored the same key id first

    # -- failed configs ----------------------------------------------------------------
    async def failed(self, task_id: str) -> dict[str, str]:
        query = select(failed_configs.c.config_id, failed_configs.c.reason).where(
            failed_configs.c.task_id == task_id
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {str(config_id): str(reason) for config_id, reason in rows}

    async def mark_failed(self, task_id: str, config_id: str, reason: str) -> None:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(delete(failed_configs).where(_matching(task_id, config_id)))
                await conn.execute(
                    insert(failed_configs).values(
                        task_id=task_id, config_id=config_id, reason=reason, failed_at=time.time()
                    )
                )
        except IntegrityError:
            pass  # another replica marked it failed at the same moment

    async def clear(self, task_id: str, config_id: str | None) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(delete(failed_configs).where(_matching(task_id, config_id)))

    # -- protocol versions -------------------------------------------------------------
    async def versions(self, task_id: str) -> dict[str, str]:
        query = select(config_versions.c.config_id, config_versions.c.protocol_version).where(
            config_versions.c.task_id == task_id
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {str(config_id): str(version) for config_id, version in rows}

    async def set_version(self, task_id: str, config_id: str, version: str | None) -> None:
        """Record *version* for the config; ``None`` removes the record (reads as 1.0)."""
        condition = _matching(task_id, config_id, config_versions)
        try:
            async with self.engine.begin() as conn:
                await conn.execute(delete(config_versions).where(condition))
                if version is not None:
                    await conn.execute(
                        insert(config_versions).values(
                            task_id=task_id, config_id=config_id, protocol_version=version
                        )
                    )
        except IntegrityError:
            pass  # a concurrent registration of the same config id wrote its row first

    async def forget_versions(self, task_id: str, config_id: str | None) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(config_versions).where(_matching(task_id, config_id, config_versions))
            )


def _matching(
    task_id: str, config_id: str | None, table: Table = failed_configs
) -> ColumnElement[bool]:
    condition = table.c.task_id == task_id
    if config_id is not None:
        condition = and_(condition, table.c.config_id == config_id)
    return condition
