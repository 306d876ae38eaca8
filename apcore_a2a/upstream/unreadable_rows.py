"""A ``tasks`` row that holds no task the SDK can read is :class:`TaskUnreadableError`,
logged once by id, instead of the parse error of protobuf or pydantic.

a2a-sdk 1.3 reads a row by its ``protocol_version``: ``ParseDict`` of A2A 1.0 JSON for
``1.0``, the 0.3 models otherwise. A row whose JSON its version does not describe (a 1.0
row holding 0.3 state names, a 0.3 row holding 1.0 JSON, a status that is no object after
a partial write or a hand edit) raises whatever that reading raised, from every read of
the store: ``GetTask`` and ``ListTasks`` answered -32603 / HTTP 500 / ``INTERNAL`` (one
such row failed every page holding it), and the start's recovery stopped the agent. The
store takes our reading through its public ``model_to_core_conversion`` hook.
"""

from __future__ import annotations

import logging

from a2a.server.models import TaskModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from cachetools import LRUCache
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.errors import TaskUnreadableError

logger = logging.getLogger(__name__)

#: Ids of unreadable rows already logged (a page read again must not log them again).
LOGGED_IDS = 10_000


class RowReader:
    """The task of a ``tasks`` row as the SDK reads it, or :class:`TaskUnreadableError`
    (pass it as a store's ``model_to_core_conversion``)."""

    def __init__(self, engine: AsyncEngine, table_name: str = "tasks") -> None:
        # A store without conversion hooks: its _from_orm is the SDK's own reading.
        self._sdk = DatabaseTaskStore(engine, table_name=table_name)
        self._logged: LRUCache[str, None] = LRUCache(LOGGED_IDS)

    def __call__(self, model: TaskModel) -> Task:
        try:
            task: Task = self._sdk._from_orm(model)
        except Exception as exc:  # the reading is pure: whatever it raises is about the row
            self._log(model, exc)
            raise TaskUnreadableError.of(model.id) from None
        return task

    def _log(self, model: TaskModel, exc: Exception) -> None:
        if model.id in self._logged:
            return
        self._logged[model.id] = None
        # The id and what failed, never the row's content (the error's text quotes it).
        logger.warning(
            "task %s: its stored row cannot be read as a task (protocol_version %.16r, "
            "%s); the row is left as it is, ListTasks leaves it out",
            model.id,
            model.protocol_version,
            type(exc).__name__,
        )
