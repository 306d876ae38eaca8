"""What the agent keeps beside each push config: delivery status and protocol version.

The A2A ``TaskPushNotificationConfig`` has neither. Kept in memory or in the task
database (every replica and restart reads the same, as does the generated signing key's
table): only failures (no record: ``active``; cleared on registering again or deleting,
which re-enables a receiver that came back) and only non-1.0 versions.

A failure names, by a salted digest, the config's :func:`aim` it was recorded for: one
written late (by a sender that gave up while the config was being replaced, on this
replica or another) is not the failure of the config stored since.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Mapping
from typing import NamedTuple

from a2a.types import TaskPushNotificationConfig
from cachetools import LRUCache
from sqlalchemy import (
    Column,
    Delete,
    Float,
    MetaData,
    String,
    Table,
    Text,
    delete,
    exists,
    insert,
    literal,
    select,
    union_all,
)
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.push.bodies import V1_0

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

# Configs stored before this table existed, and all 1.0 ones, have no row and read as 1.0.
config_versions = Table(
    "apcore_a2a_push_config_versions",
    _metadata,
    Column("task_id", String(255), primary_key=True),
    Column("config_id", String(255), primary_key=True),
    Column("protocol_version", String(16), nullable=False),
)


class Aim(NamedTuple):
    """Where a config's deliveries go, what they carry there and in which protocol
    version's shape: a config stored again with another of these is another destination."""

    url: str
    token: str
    scheme: str
    credentials: str
    version: str


#: One config's state as stored now: its aim, and why it failed (``None``: it has not).
State = tuple[Aim, str | None]
# A failure's value: "<salt><digest> <reason>"; a record without one (written by an earlier
# release) is the failure of whatever config has the id.
_MARKED = re.compile(r"([0-9a-f]{16})([0-9a-f]{32}) (.*)", re.DOTALL)


def aim(config: TaskPushNotificationConfig, version: str) -> Aim:
    """The :class:`Aim` of *config* registered under protocol *version*."""
    auth = config.authentication
    return Aim(config.url, config.token, auth.scheme, auth.credentials, version)


def _digest(key: bytes | None, salt: str, of: Aim) -> str:
    # Salted: the token and credentials are in it, and the record is not encrypted. Keyed
    # too where the configs are encrypted, or the digest would open a guess of a weak
    # token that their encryption closes.
    text = "\0".join((salt, *of)).encode()
    if key is None:
        return hashlib.sha256(text).hexdigest()[:32]
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:32]


def _failure(key: bytes | None, value: str | None, of: Aim) -> str | None:
    """The reason in a failure record *value*, if it was recorded for *of*."""
    marked = _MARKED.fullmatch(value or "")
    if marked is None:
        return value
    salt, digest, reason = marked.groups()
    return reason if hmac.compare_digest(_digest(key, salt, of), digest) else None


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

    async def drop(
        self, task_id: str, config_id: str | None, *, unless_in: Table | None = None
    ) -> None:
        """Drop the records of one config or all of the task, but not those of a config
        stored in *unless_in* (a config table)."""
        query = self._delete(task_id, config_id)
        if unless_in is not None:
            key = (unless_in.c.task_id == self.table.c.task_id) & (
                unless_in.c.config_id == self.table.c.config_id
            )
            query = query.where(~exists().where(key))
        async with self.engine.begin() as conn:
            await conn.execute(query)

    def _delete(self, task_id: str, config_id: str | None) -> Delete:
        query = delete(self.table).where(self.table.c.task_id == task_id)
        return query if config_id is None else query.where(self.table.c.config_id == config_id)


class _MemoryRecords:
    """``ConfigRecords`` in memory, for the *limit* tasks touched most recently."""

    def __init__(self, limit: int) -> None:
        self._tasks: LRUCache[str, dict[str, str]] = LRUCache(maxsize=limit)

    async def read(self, task_id: str) -> dict[str, str]:
        return dict(self._tasks.get(task_id, {}))

    async def put(self, task_id: str, config_id: str, value: str) -> None:
        self._tasks[task_id] = {**self._tasks.get(task_id, {}), config_id: value}

    async def drop(
        self, task_id: str, config_id: str | None, *, unless_in: Table | None = None
    ) -> None:
        del unless_in  # in memory: no other process stores configs
        configs = self._tasks.get(task_id, {})
        if config_id is not None:
            configs.pop(config_id, None)
        if config_id is None or not configs:
            self._tasks.pop(task_id, None)


async def create_tables(engine: AsyncEngine, metadata: MetaData = _metadata) -> None:
    """Create the tables of *metadata* (the push tables) on *engine* if they are missing."""
    # Processes starting together (``workers``) race to create a table; PostgreSQL fails
    # the loser's CREATE on pg_type's unique index: a second pass finds it made.
    for attempt in range(3):
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
            return
        except (IntegrityError, ProgrammingError):
            if attempt == 2:
                raise


class ConfigStatusBook:
    """Failures and protocol versions of push configs, in SQL (on *engine*) or in memory
    (at most *max_tasks* tasks per kind, so many dead webhooks cannot grow it unbounded):
    a failure is kept marked with the aim it was recorded for (read through :meth:`of`),
    ``versions`` holds the versions not 1.0."""

    #: the tables of a SQL store's records, keyed by task id (retention purges them too),
    #: in the order :meth:`of` takes their values: failures, versions
    tables = (failed_configs, config_versions)

    def __init__(
        self,
        engine: AsyncEngine | None = None,
        *,
        max_tasks: int = 10_000,
        secret: str | None = None,
    ) -> None:
        def records(table: Table) -> ConfigRecords | _MemoryRecords:
            return _MemoryRecords(max_tasks) if engine is None else ConfigRecords(engine, table)

        self._failed, self.versions = records(failed_configs), records(config_versions)
        #: the engine of the SQL store whose :attr:`tables` hold the records (``None``:
        #: they are in memory)
        self.engine = engine
        self._key = secret.encode() if secret else None  # the configs' encryption key

    async def of(
        self,
        task_id: str,
        configs: list[TaskPushNotificationConfig],
        records: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
    ) -> dict[str, State]:
        """``{config_id: (aim, failure reason or None)}`` of *configs* of *task_id* as
        stored now, in one read of the records (none when given their *records*, read
        with the configs: ``{config_id: value}`` of each of :attr:`tables`)."""
        failed, versions = records or await self._read(task_id)
        states = {}
        for config in configs:
            config_id = config.id or task_id  # as the SDK's stores default it
            now = aim(config, versions.get(config_id, V1_0))
            states[config_id] = (now, _failure(self._key, failed.get(config_id), now))
        return states

    async def _read(self, task_id: str) -> tuple[dict[str, str], dict[str, str]]:
        if self.engine is None:
            return await self._failed.read(task_id), await self.versions.read(task_id)
        f, v = failed_configs.c, config_versions.c
        query = union_all(
            select(literal("f"), f.config_id, f.reason).where(f.task_id == task_id),
            select(literal("v"), v.config_id, v.protocol_version).where(v.task_id == task_id),
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        both: dict[str, dict[str, str]] = {"f": {}, "v": {}}
        for kind, config_id, value in rows:
            both[str(kind)][str(config_id)] = str(value)
        return both["f"], both["v"]

    async def fail(self, task_id: str, config_id: str, of: Aim, reason: str) -> None:
        """Record that the config stored with *of* failed, for *reason*."""
        salt = secrets.token_hex(8)
        await self._failed.put(task_id, config_id, f"{salt}{_digest(self._key, salt, of)} {reason}")

    async def clear(self, task_id: str, config_id: str) -> None:
        """Drop the failure of a config (registered again: its deliveries resume)."""
        await self._failed.drop(task_id, config_id)

    async def set_version(self, task_id: str, config_id: str, version: str) -> None:
        """Record the protocol version a config was (re)registered under."""
        if version == V1_0:  # the version of a config without a record
            await self.versions.drop(task_id, config_id)
        else:
            await self.versions.put(task_id, config_id, version)

    async def forget(
        self, task_id: str, config_id: str | None = None, *, unless_in: Table | None = None
    ) -> None:
        """Drop every record of one config, or of every config of the task (deletion),
        but those of a config stored in *unless_in* (stored again since the deletion)."""
        await self._failed.drop(task_id, config_id, unless_in=unless_in)
        await self.versions.drop(task_id, config_id, unless_in=unless_in)
