"""The push-config store the request handler sees: limits, header safety, bookkeeping.

Over the storage layer's store: the cap per task, ``-32602`` for a token or credentials
that cannot travel in an HTTP header (a line break would smuggle another header) and for
an id the SQL tables cannot hold (over 255 characters, a NUL), the
call's protocol version, a fresh failure record. The cap counts stored configs, a
row that cannot be read included (a SQL store's ``stored_config_ids``: lists leave such a
row out, ``upstream/unreadable_push_configs.py``). It holds under concurrency: a
process serializes a task's registrations; in cluster mode a new config takes one of its
task's quota slots (scope ``push``) until deleted; processes sharing a database without
it count again after the insert and withdraw an excess.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from a2a.server.context import ServerCallContext
from a2a.server.models import PushNotificationConfigModel
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from apcore_a2a.edge.keys import unstorable
from apcore_a2a.errors import QuotaExceededError
from apcore_a2a.push.bodies import protocol_version
from apcore_a2a.push.status import Aim, ConfigStatusBook, State, aim, config_versions
from apcore_a2a.storage.outages import ConfigRows
from apcore_a2a.storage.quota_slots import PUSH_SCOPE

if TYPE_CHECKING:
    from apcore_a2a.storage.quota_slots import SqlQuotaSlots

# An RFC 9110 field value the sender can write: visible ASCII, with spaces and tabs only
# inside (no leading or trailing white space, which h11 refuses to send). No obs-text: the
# value is text, and httpx encodes header text as ASCII.
_HEADER_SAFE = re.compile(r"[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?")
# A scheme is an RFC 9110 token: it is followed by a space in the header.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: The longest config id the SQL tables hold (the SDK's configs and our versions, VARCHAR),
#: on every store, so a config is accepted or refused the same whatever the backend.
MAX_CONFIG_ID_CHARS: int = min(
    getattr(PushNotificationConfigModel.__table__.c.config_id.type, "length", None) or 255,
    getattr(config_versions.c.config_id.type, "length", None) or 255,
)


def _holder(task_id: str, config_id: str) -> str:
    """The slot holder of a stored config (hashed: both ids together may not fit)."""
    return "c:" + hashlib.sha256(f"{task_id}\n{config_id}".encode()).hexdigest()


def _check_storable_and_header_safe(config: TaskPushNotificationConfig) -> None:
    auth = config.authentication
    unsafe = "characters that cannot be sent in an HTTP header"
    problem = unstorable(config.id, MAX_CONFIG_ID_CHARS)
    if problem is not None:
        problem = f"id {problem}"
    elif config.token and not _HEADER_SAFE.fullmatch(config.token):
        problem = f"the token contains {unsafe}"
    elif auth.scheme and not _TOKEN.fullmatch(auth.scheme):
        problem = "authentication.scheme must be a single word such as Bearer or Basic"
    elif auth.credentials and not _HEADER_SAFE.fullmatch(auth.credentials):
        problem = f"authentication.credentials contain {unsafe}"
    if problem is not None:
        raise InvalidParamsError(message=f"Invalid push notification config: {problem}")


class PushConfigStore(PushNotificationConfigStore):
    """A config store with a per-task cap, header checks and status/version bookkeeping;
    *slots* are the cluster's quota slots (see the module docstring)."""

    def __init__(
        self,
        inner: PushNotificationConfigStore,
        statuses: ConfigStatusBook,
        *,
        max_per_task: int = 10,
        slots: SqlQuotaSlots | None = None,
    ) -> None:
        self.inner = inner
        self.statuses = statuses
        self.max_per_task = max_per_task
        self.slots = slots
        #: told of each deletion (``None``) and registration of a config (its aim), to drop
        #: what this process still delivers for it to another destination
        self.changed: Callable[[str, str | None, Aim | None], None] | None = None
        # Striped: registrations of one task always share a lock (a rare, short wait).
        self._locks = [asyncio.Lock() for _ in range(64)]

    def _over_cap(self) -> QuotaExceededError:
        return QuotaExceededError(
            f"This task already has {self.max_per_task} push notification configs, the "
            "most allowed; delete one or replace one by registering its id again"
        )

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        _check_storable_and_header_safe(notification_config)
        config_id = notification_config.id or task_id  # as the SDK's stores default it
        version = protocol_version(context)
        async with self._locks[hash(task_id) % len(self._locks)]:
            existing = await self._stored_ids(task_id)
            is_new = config_id not in existing
            if is_new and len(existing) >= self.max_per_task:
                raise self._over_cap()
            slot = None
            if is_new and self.slots is not None:
                slot = f"r:{uuid.uuid4().hex}"
                if not await self._take(task_id, slot):
                    raise self._over_cap()
            try:
                # The version first: a sender (on any replica) that sees the config must
                # find its version, or it would post a 1.0 body to a 0.3 receiver. The
                # failure cleared before it is stored too: a delivery to it may fail as soon.
                await self.statuses.set_version(task_id, config_id, version)
                await self.statuses.clear(task_id, config_id)
                stored = await self.inner.set_info(task_id, notification_config, context)
                if is_new and len(await self._stored_ids(task_id)) > self.max_per_task:
                    # Another process registered at the same moment: withdraw this one.
                    await self.inner.delete_info(task_id, context, config_id)
                    raise self._over_cap()
                if self.slots is not None:
                    holder = _holder(task_id, config_id)
                    if slot is not None:
                        # The config is stored: the slot is its own now, or once the
                        # database takes the rename (``SqlQuotaSlots.rename``).
                        request, slot = slot, None
                        await self.slots.rename(PUSH_SCOPE, request, holder)
                    # Registered or deleted in another process at the same moment.
                    if not await self._settle(task_id, holder):
                        is_new = True  # deleted meanwhile: stored again, over the cap
                        await self.inner.delete_info(task_id, context, config_id)
                        raise self._over_cap()
                # Again: a delete on another process that forgot the records before this
                # store (see delete_info) forgot the version written above.
                await self.statuses.set_version(task_id, config_id, version)
            except BaseException:
                if is_new:  # not those of a config stored all the same (an outage after)
                    await self.statuses.forget(task_id, config_id, unless_in=self._table())
                if slot is not None and self.slots is not None:
                    await self.slots.give_back(PUSH_SCOPE, slot)
                raise
            if self.changed is not None:
                self.changed(task_id, config_id, aim(notification_config, version))
        return stored

    async def _stored_ids(self, task_id: str) -> set[str]:
        """The ids of the configs *task_id* stores, of every owner, readable or not."""
        if isinstance(self.inner, ConfigRows):  # a store in memory lists every config
            return await self.inner.stored_config_ids(task_id)
        return {c.id or task_id for c in await self.inner.get_info_for_dispatch(task_id)}

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info(task_id, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return await self.inner.get_info_for_dispatch(task_id)

    async def now(self, task_id: str) -> tuple[list[TaskPushNotificationConfig], dict[str, State]]:
        """The configs of *task_id* as stored now, and their states
        (``ConfigStatusBook.of``): one read of the store (a SQL one's records joined to
        its configs), so a sender sees a config's whole aim and failure at once."""
        if self.statuses.engine is not None and isinstance(self.inner, ConfigRows):
            rows = await self.inner.with_records(task_id, self.statuses.tables)
            configs = [config for config, _ in rows]
            failed, versions = (
                {c.id: values[i] for c, values in rows if values[i] is not None} for i in (0, 1)
            )
            return configs, await self.statuses.of(task_id, configs, (failed, versions))
        configs = await self.inner.get_info_for_dispatch(task_id)
        return configs, await self.statuses.of(task_id, configs) if configs else {}

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self.inner.delete_info(task_id, context, config_id)
        # The records after the row: forgotten first, a delete that never got to the row
        # (its process killed, the database gone) left the config stored read as 1.0.
        # Not those of a config a registration on another process stored again meanwhile
        # (its version written before its row; one stored after this writes it again).
        await self.statuses.forget(task_id, config_id, unless_in=self._table())
        if self.changed is not None:
            self.changed(task_id, config_id, None)
        if self.slots is None:
            return
        if config_id is not None:  # registered again in another process meanwhile?
            await self._settle(task_id, _holder(task_id, config_id))
        else:
            await self._settle_all(task_id)

    def _table(self) -> Table | None:
        """The SQL table of the configs, when the records are in its database."""
        same_db = self.statuses.engine is not None and isinstance(self.inner, ConfigRows)
        return cast("Table", PushNotificationConfigModel.__table__) if same_db else None

    async def _take(self, task_id: str, slot: str) -> bool:
        """Take one of *task_id*'s slots for *slot*; when all are taken, first free those
        of configs no longer stored (a deletion that never settled: its process killed,
        the database lost) and try again."""
        assert self.slots is not None
        take = self.slots.take
        if await take(PUSH_SCOPE, task_id, slot, self.max_per_task):
            return True
        return await self._settle_all(task_id) and await take(
            PUSH_SCOPE, task_id, slot, self.max_per_task
        )

    async def _settle_all(self, task_id: str) -> bool:
        """Settle the slot of every config of *task_id* that holds one; whether any was
        freed."""
        assert self.slots is not None
        holders = await self.slots.holders(PUSH_SCOPE, task_id)
        configs = [h for h in holders if not h.startswith("r:")]  # not registrations in flight
        for holder in configs:
            await self._settle(task_id, holder)
        return len(await self.slots.holders(PUSH_SCOPE, task_id)) < len(holders)

    async def _settle(self, task_id: str, holder: str) -> bool:
        """The slot of the config *holder* names held if it is stored, freed if not
        (``SqlQuotaSlots.settle``); ``False`` when it is stored and every slot of its task
        is taken."""
        if self.slots is None:
            return True
        table = PushNotificationConfigModel.__table__
        ids = select(table.c.config_id).where(table.c.task_id == task_id)

        async def stored(conn: AsyncConnection) -> bool:
            rows = await conn.execute(ids)
            return any(_holder(task_id, str(config_id)) == holder for (config_id,) in rows)

        return await self.slots.settle(PUSH_SCOPE, task_id, holder, self.max_per_task, stored)
