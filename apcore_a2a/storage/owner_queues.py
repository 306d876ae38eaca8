"""Which of many owners' items a bounded memory structure gives up first: the oldest item
of the owner holding the most, so one caller's many items replace its own, never those of
an owner holding fewer. The memory task store files its finished tasks here
(``memory.py``), the memory event log its task logs (``event_log.py``).

Every operation is O(1): owners are bucketed by how many items they hold.
"""

from __future__ import annotations

from collections import OrderedDict


class OwnerQueues:
    """Items (task ids) filed per owner, oldest first."""

    def __init__(self) -> None:
        #: owner -> its items, oldest first
        self._owned: dict[str, OrderedDict[str, None]] = {}
        #: number of items -> the owners holding that many, in the order they got there
        #: (a tie gives up the longest holder's item, the same in every process)
        self._holding: dict[int, dict[str, None]] = {}
        self._most = 0

    def add(self, owner: str, item: str) -> None:
        """File *item* under *owner* as its newest (an item already filed moves there)."""
        owned = self._owned.get(owner)
        if owned is None:
            owned = self._owned[owner] = OrderedDict()
        elif item in owned:
            owned.move_to_end(item)
            return
        owned[item] = None
        self._recount(owner, len(owned) - 1, len(owned))

    def discard(self, owner: str, item: str) -> None:
        """Forget *item* of *owner* (if it is filed)."""
        owned = self._owned.get(owner)
        if owned is None or item not in owned:
            return
        del owned[item]
        if not owned:
            del self._owned[owner]
        self._recount(owner, len(owned) + 1, len(owned))

    def next_out(self) -> tuple[str, str] | None:
        """``(owner, item)``: the oldest item of the owner holding the most (``None`` if
        nothing is filed). The caller discards it."""
        if not self._most:
            return None
        owner = next(iter(self._holding[self._most]))
        return owner, next(iter(self._owned[owner]))

    def holds(self, owner: str) -> int:
        """How many items *owner* has filed."""
        return len(self._owned.get(owner, ()))

    def oldest(self, owner: str, *, skip: str) -> str | None:
        """The oldest item of *owner* other than *skip* (``None``: it has no other)."""
        return next((item for item in self._owned.get(owner, ()) if item != skip), None)

    def _recount(self, owner: str, before: int, after: int) -> None:
        """*owner* now holds *after* items instead of *before* (one apart)."""
        if before:
            self._holding[before].pop(owner, None)
            if not self._holding[before]:
                del self._holding[before]
        if after:
            self._holding.setdefault(after, {})[owner] = None
        # Counts move by one, so the largest moves by at most one.
        self._most = max(self._most, after)
        while self._most and self._most not in self._holding:
            self._most -= 1
