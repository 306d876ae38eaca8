"""A ``tasks`` row that holds no task the SDK can read is :class:`TaskUnreadableError`,
logged once by id, instead of the parse error of protobuf or pydantic.

a2a-sdk 1.3 reads a row by its ``protocol_version``: ``ParseDict`` of A2A 1.0 JSON for
``1.0``, the 0.3 models otherwise. A row whose JSON its version does not describe (a 1.0
row holding 0.3 state names, a 0.3 row holding 1.0 JSON, a status that is no object after
a partial write or a hand edit) raises whatever that reading raised, from every read of
the store: ``GetTask`` and ``ListTasks`` answered -32603 / HTTP 500 / ``INTERNAL`` (one
such row failed every page holding it), and the start's recovery stopped the agent. A
store takes our reading through its public ``model_to_core_conversion`` hook
(:func:`read_rows_safely`), ours and an application's alike.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

from a2a.server.models import TaskModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from cachetools import LRUCache

from apcore_a2a.errors import TaskUnreadableError

logger = logging.getLogger(__name__)

#: Unreadable rows already logged (a page or a list read again must not log them again).
LOGGED_ROWS = 10_000


class WarnOnce:
    """Logs a WARNING for each key once (of the last :data:`LOGGED_ROWS` keys): the
    unreadable-row readers of tasks and of push configs."""

    def __init__(self, to: logging.Logger) -> None:
        self._logger = to
        self._logged: LRUCache[Hashable, None] = LRUCache(LOGGED_ROWS)

    def __call__(self, key: Hashable, message: str, *args: object) -> None:
        if key not in self._logged:
            self._logged[key] = None
            self._logger.warning(message, *args)


class RowReader:
    """The task of a ``tasks`` row as *store* reads it (its own conversion, else the
    SDK's), or :class:`TaskUnreadableError`."""

    def __init__(self, store: DatabaseTaskStore) -> None:
        # A store without conversion hooks: its _from_orm is the SDK's own reading.
        self._read = store.model_to_core_conversion or DatabaseTaskStore(store.engine)._from_orm
        self._warn = WarnOnce(logger)

    def __call__(self, model: TaskModel) -> Task:
        try:
            return self._read(model)
        except Exception as exc:  # the reading is pure: whatever it raises is about the row
            # The id and what failed, never the row's content (the error's text quotes it).
            self._warn(
                model.id,
                "task %s: its stored row cannot be read as a task (protocol_version %.16r, "
                "%s); the row is left as it is, ListTasks leaves it out",
                model.id,
                model.protocol_version,
                type(exc).__name__,
            )
            raise TaskUnreadableError.of(model.id) from None


def read_rows_safely(store: DatabaseTaskStore) -> None:
    """Make every read of *store* read its rows through a :class:`RowReader` (once: a
    store handed to two agents keeps the first one's)."""
    if not isinstance(store.model_to_core_conversion, RowReader):
        store.model_to_core_conversion = RowReader(store)
