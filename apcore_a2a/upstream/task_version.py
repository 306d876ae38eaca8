"""The number inside a cluster store's ``TaskVersion`` (the task's write count)."""

from __future__ import annotations

from a2a.server.cluster import TaskVersion


def version_number(version: TaskVersion) -> int:
    """The integer *version* wraps (0 for ``TaskVersion.MISSING``)."""
    value = version._value
    if not isinstance(value, int):
        raise TypeError(f"expected an integer task version, got {type(value).__name__}")
    return value
