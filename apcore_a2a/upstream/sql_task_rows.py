"""Rows of the SDK's ``tasks`` table without saving them, for the group-commit writers, and
tasks of rows read without the store, for the index-planned ``ListTasks`` (``listing.py``);
the number inside a cluster store's ``TaskVersion``, which those writers write in the SDK's
``task_versions`` and ``task_events`` rows. a2a-sdk 1.3 keeps each private: the mapping in
``DatabaseTaskStore._to_orm`` / ``_from_orm``, the number in ``TaskVersion._value``."""

from __future__ import annotations

from typing import Any

from a2a.server.cluster import TaskVersion
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

    def task(self, model: Any) -> Task:
        """The task of a ``tasks`` row read as the store's ORM *model*, as
        ``DatabaseTaskStore.get`` reads it (older protocol versions' rows included)."""
        task: Task = self.store._from_orm(model)
        return task


def version_number(version: TaskVersion) -> int:
    """The integer *version* wraps (0 for ``TaskVersion.MISSING``): the task's write count."""
    value = version._value
    if not isinstance(value, int):
        raise TypeError(f"expected an integer task version, got {type(value).__name__}")
    return value
