"""Rows of the SDK's ``tasks`` table as plain dicts, for Core statements.

Made by the SDK store's own ORM conversion (private, but the format its reads expect), so
rows written with ``insert()``/upserts read back through the SDK store unchanged.
"""

from __future__ import annotations

from typing import Any

from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task
from sqlalchemy import Table, inspect

__all__ = ["TaskRows"]


class TaskRows:
    """The ``tasks`` table of *store* and its rows."""

    def __init__(self, store: DatabaseTaskStore) -> None:
        self.store = store
        self.table: Table = store.task_model.__table__  # type: ignore[assignment]
        mapper = inspect(store.task_model)
        #: (ORM attribute, column name)
        self._columns = [(attr.key, attr.columns[0].name) for attr in mapper.column_attrs]
        #: column names, in table order
        self.columns = [column for _, column in self._columns]

    def row(self, task: Task, owner: str) -> dict[str, Any]:
        """*task*'s row for *owner*."""
        model = self.store._to_orm(task, owner)
        return {column: getattr(model, key) for key, column in self._columns}
