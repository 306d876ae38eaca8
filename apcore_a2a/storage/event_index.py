"""How a task's event log is read: through ``task_events (task_id, seq)``, in that order.

The SDK's table has an index on ``task_id`` alone. A subscription reads an ordered range
of one task's events (its latest id, the events after a ``Last-Event-ID`` a page at a
time, the id at a version). Asked for ``task_id = X ORDER BY seq``, PostgreSQL may walk
the table's primary key instead, over the events of every task written since (when one
task holds a large share of the table it expects to meet its rows soon), or read every
event of the task before the range. The reads here name the task as a range of the index's
first column and order by both columns: only this index gives that order, so each read
is one seek and the rows it returns (``docs/storage.md``, *What a request reads*).
"""

from __future__ import annotations

from typing import Any

from a2a.server.models import TaskEventModel as _E
from sqlalchemy import and_, select

INDEX_NAME = "ix_apcore_a2a_task_events_task_seq"


def of_task(task_id: str) -> Any:
    """The rows of *task_id*, as a range of the index's first column (the planner keeps
    an equality out of the order and may then prefer the primary key, see above)."""
    return and_(_E.task_id >= task_id, _E.task_id <= task_id)


def in_order(*, newest_first: bool = False) -> tuple[Any, Any]:
    """The index's order: ``ORDER BY task_id, seq`` (both descending if *newest_first*)."""
    if newest_first:
        return _E.task_id.desc(), _E.seq.desc()
    return _E.task_id.asc(), _E.seq.asc()


def latest(task_id: str) -> Any:
    """The statement of *task_id*'s latest event id (``seq``): one index entry (narrow it
    with ``.where``: the latest of those)."""
    return select(_E.seq).where(of_task(task_id)).order_by(*in_order(newest_first=True)).limit(1)
