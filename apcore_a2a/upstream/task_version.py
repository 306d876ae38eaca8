"""The number inside a cluster store's ``TaskVersion``.

Upstream (a2a-sdk 1.3, ``a2a.server.cluster.version``): ``TaskVersion`` wraps the value a
versioned store assigns and offers no accessor for it ("callers do not read it"). The
SQL cluster store's value is the task's write count, which is also the ``task_version``
of each row of ``task_events``; finding where a version stands in that table (the
position a resumed subscription starts after) needs the number.
"""

from __future__ import annotations

from a2a.server.cluster import TaskVersion


def version_number(version: TaskVersion) -> int:
    """The integer *version* wraps (0 for ``TaskVersion.MISSING``)."""
    value = version._value
    if not isinstance(value, int):
        raise TypeError(f"expected an integer task version, got {type(value).__name__}")
    return value
