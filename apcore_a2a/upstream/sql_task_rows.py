"""Rows of the SDK's ``tasks`` table without saving them.

Upstream (a2a-sdk 1.3, ``a2a.server.tasks.DatabaseTaskStore``): a task becomes its row
only inside ``save`` (the private ``_to_orm``), an ORM merge in a transaction of its own
per task. The group-commit writers (``storage/deferred.py``)
write many rows in one statement, so they need the row itself, exactly as the SDK writes
it, since the SDK's reads parse it back. The columns and types our statements write are
pinned against the SDK's models and migrations by ``tests/upstream/test_sql_task_rows.py``.
"""

from __future__ import annotations

from typing import Any

from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy import Table, inspect


class TaskRows:
    """The ``tasks`` table of *store* and its rows as plain dicts (for Core statements)."""

    def __init__(self, store: DatabaseTaskStore) -> None:
        self.store = store
        self.table: Table = store.task_model.__table__  # type: ignore[assignment]
        #: (ORM attribute, column name)
        self._columns = [(a.key, a.columns[0].name) for a in inspect(store.task_model).column_attrs]
        #: column names, in table order
        self.columns = [column for _, column in self._columns]

    def row(self, task: Task, owner: str) -> dict[str, Any]:
        """*task*'s row for *owner*, as ``DatabaseTaskStore.save`` would write it."""
        model = self.store._to_orm(task, owner)
        return {column: getattr(model, key) for key, column in self._columns}
