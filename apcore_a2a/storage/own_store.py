"""The start of an agent on an application's own ``TaskStore`` object (``docs/storage.md``,
*Your own task store*): what it does not get, said once, and the indexes the agent's reads
of an a2a-sdk ``DatabaseTaskStore`` use, where the agent may create them.

Restart recovery and retention stay with the stores the agent opens from a URL: those it
holds alone or with its own replicas (``_owner.py``), where a task left ``working`` can only
be one a dead process of this agent ran. An application's table may be shared with another
agent or with the application's own code, whose running tasks a recovery would fail and
whose finished ones a purge would delete.
"""

from __future__ import annotations

import logging

from a2a.server.tasks import DatabaseTaskStore, TaskStore
from sqlalchemy import text

from ._urls import index_sql, raced
from .contexts import context_index
from .index_check import index_covers
from .listing import state_index
from .outages import DB_ERRORS, reason

logger = logging.getLogger(__name__)

_DOCS = "docs/storage.md, *Your own task store*"

#: how long a PostgreSQL index build waits for the application's open writes on its table
LOCK_WAIT = "1s"


async def start_own_store(store: TaskStore, *, paged: bool, retention_seconds: float) -> None:
    """Log what *store* does not get; on a ``DatabaseTaskStore`` that creates its own table,
    create it and the indexes of the context check and (where the agent pages its
    ``ListTasks``: *paged*) of a page filtered by ``status``, logging a failure instead of
    failing the start: every read works without them, only slower."""
    retention = f"; task_retention_seconds={retention_seconds:g} deletes none of its tasks"
    retention = retention if retention_seconds > 0 else ""
    level = logging.WARNING if retention else logging.INFO
    kind = type(store).__name__
    if not isinstance(store, DatabaseTaskStore):
        if retention:
            logger.log(level, "task store: the application's own %s%s (%s)", kind, retention, _DOCS)
        return
    table = store.task_model.__tablename__
    logger.log(
        level,
        "task store: the application's own %s (table %r): tasks a crash left submitted or "
        "working stay so, as another process sharing the table may be running them%s; a "
        "task_store URL gets restart recovery and retention (%s)",
        *(kind, table, retention, _DOCS),
    )
    if store.engine.dialect.name not in ("sqlite", "postgresql"):
        return  # the indexes' SQL is theirs (MySQL has no CREATE INDEX IF NOT EXISTS)
    indexes = [context_index(store)] + [state_index(store)] * paged
    statements = "; ".join(index_sql(store.engine.dialect, *index) for index in indexes)
    if not store.create_table:
        logger.info(
            "task store: the application creates its table %r itself (create_table=False), "
            "so the agent adds no index to it; for its lists and context checks add: %s",
            *(table, statements),
        )
        return

    try:
        await raced(store.initialize)  # other agents may be starting on the table too
    except DB_ERRORS as exc:
        # Not fatal: the store tries again at each call (rights granted, the database up).
        logger.error(
            "task store: could not create the application's table %r (%s); every call on a "
            "task fails until it exists",
            *(table, reason(exc)),
        )
        return

    others: dict[str, str] = {}  # name: what the index of that name covers instead

    async def create() -> None:
        others.clear()
        for name, _table, columns in indexes:  # each on its own: one the rows refuse costs itself
            async with store.engine.begin() as conn:
                # Building an index waits for every open write on the table, and every
                # write queued meanwhile waits for it: one the table has is left alone, and
                # a PostgreSQL build gives up after LOCK_WAIT (the next start tries again).
                covers = await index_covers(conn, name, table, columns)
                if covers is not None:
                    if covers:
                        others[name] = covers
                    continue
                if conn.dialect.name == "postgresql":
                    await conn.execute(text(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'"))
                await conn.execute(text(index_sql(conn.dialect, name, table, columns)))

    try:
        await raced(create)  # other agents may be starting on the table too
    except DB_ERRORS as exc:
        logger.warning(
            "task store: could not create the indexes of the application's table %r (%s); "
            "its lists and context checks read the caller's tasks until they exist: %s",
            *(table, reason(exc), statements),
        )
        return
    for name, _table, columns in indexes:
        if name in others:  # an index the agent did not make is the application's to change
            logger.warning(
                "task store: index %s covers %s, not %s (%s): the application's table %r is "
                "read without it (lists and context checks read the caller's tasks); drop or "
                "rename that index and restart, and the agent creates its own (%s)",
                *(name, others[name], table, columns, table, _DOCS),
            )
    if read := [index[0] for index in indexes if index[0] not in others]:
        logger.info(
            "task store: the application's table %r reads the indexes %s",
            *(table, ", ".join(read)),
        )
