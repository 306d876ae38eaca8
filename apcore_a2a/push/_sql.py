"""SQL tables owned by the push package: signing key, failed configs, config versions.

They live in the same database as the tasks and push configs (the engine the storage
layer opened), so a generated key survives restarts and is shared by every replica, a
config marked ``failed`` reads ``failed`` on every replica, and a config registered by a
0.3 client is delivered in the 0.3 shape whichever replica sends it, after restarts too.
"""

from __future__ import annotations

import time

from sqlalchemy import Column, Delete, Float, MetaData, String, Table, Text, delete, insert, select
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["ConfigRecords", "PushTables"]

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
    Column("failed_at", Float, nullable=False, default=time.time),
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


class ConfigRecords:
    """One text value per ``(task_id, config_id)`` in *table*'s third column."""

    def __init__(self, engine: AsyncEngine, table: Table) -> None:
        self.engine = engine
        self.table = table
        self.value = table.columns[2]

    async def read(self, task_id: str) -> dict[str, str]:
        query = select(self.table.c.config_id, self.value).where(self.table.c.task_id == task_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {str(config_id): str(value) for config_id, value in rows}

    async def put(self, task_id: str, config_id: str, value: str) -> None:
        row = {"task_id": task_id, "config_id": config_id, self.value.name: value}
        try:
            async with self.engine.begin() as conn:
                await conn.execute(self._delete(task_id, config_id))
                await conn.execute(insert(self.table).values(**row))
        except IntegrityError:
            pass  # another replica wrote the same config's row at the same moment

    async def drop(self, task_id: str, config_id: str | None) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(self._delete(task_id, config_id))

    def _delete(self, task_id: str, config_id: str | None) -> Delete:
        query = delete(self.table).where(self.table.c.task_id == task_id)
        return query if config_id is None else query.where(self.table.c.config_id == config_id)


class PushTables:
    """Async access to the push tables on *engine* (created on :meth:`initialize`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.failures = ConfigRecords(engine, failed_configs)
        self.versions = ConfigRecords(engine, config_versions)

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
