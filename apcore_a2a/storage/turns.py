"""Turn claims: which one message may continue a task parked in ``input-required``.

A parked task is continued by exactly one message. Every follow-up first claims the
task's current turn -- the task id plus the timestamp of the status it is parked in --
and only the first claim of a turn wins; later ones (concurrent or repeated, here or on
another replica) are refused. The next time the task parks, its status has a new
timestamp and so a new turn.

In one process the claims live in memory; in cluster mode they are rows of a table
whose primary key is the turn, so the database decides between replicas
(``_replicas.SqlTurnClaims``).
"""

from __future__ import annotations

from typing import Protocol

from cachetools import FIFOCache

__all__ = ["MemoryTurnClaims", "TurnClaims"]


class TurnClaims(Protocol):
    async def claim(self, task_id: str, turn: str) -> bool:
        """Whether this call is the first to claim *turn* of *task_id*."""
        ...


class MemoryTurnClaims:
    """Claims of one process, remembered for the most recent *max_entries* turns."""

    def __init__(self, max_entries: int = 100_000) -> None:
        self._seen: FIFOCache[tuple[str, str], None] = FIFOCache(maxsize=max_entries)

    async def claim(self, task_id: str, turn: str) -> bool:
        # No await between the test and the insert: atomic on the event loop.
        key = (task_id, turn)
        if key in self._seen:
            return False
        self._seen[key] = None
        return True
