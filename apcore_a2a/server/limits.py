"""Stream limits shared by every binding: a global cap and a per-caller quota.

HTTP SSE streams (request guard) and gRPC server streams (gRPC interceptor) take their
slot from the same :class:`StreamLimiter`, so a caller cannot hold more than its quota
whichever binding it uses, and the agent never serves more than ``max_streams``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

__all__ = ["GLOBAL_RETRY_AFTER", "StreamLimiter", "StreamRefusal"]

#: Seconds a client is told to wait when the agent as a whole is at its stream cap.
GLOBAL_RETRY_AFTER = 5


@dataclass(frozen=True, slots=True)
class StreamRefusal:
    """Why a stream was refused: the agent is full, or the caller used its quota."""

    scope: Literal["agent", "caller"]
    limit: int

    @property
    def message(self) -> str:
        if self.scope == "agent":
            return "Too many concurrent streams; retry later"
        return f"Stream quota exceeded: at most {self.limit} concurrent streams per caller"


class StreamLimiter:
    """Counts open streams, in total and per caller key (read by ``/metrics``).

    A caller key is the task owner for authenticated callers and ``ip:<address>`` for
    anonymous ones. ``per_caller`` 0 means no per-caller quota.
    """

    __slots__ = ("_by_caller", "active", "max_streams", "per_caller", "rejected")

    def __init__(self, max_streams: int, per_caller: int = 0) -> None:
        self.max_streams = max_streams
        self.per_caller = per_caller
        self.active = 0
        self.rejected = 0
        self._by_caller: Counter[str] = Counter()

    def acquire(self, caller: str) -> StreamRefusal | None:
        """Take a slot for *caller*, or say why not (then nothing was taken)."""
        if self.active >= self.max_streams:
            self.rejected += 1
            return StreamRefusal("agent", self.max_streams)
        if self.per_caller and self._by_caller[caller] >= self.per_caller:
            self.rejected += 1
            return StreamRefusal("caller", self.per_caller)
        self.active += 1
        self._by_caller[caller] += 1
        return None

    def release(self, caller: str) -> None:
        """Give back the slot *caller* took."""
        self.active -= 1
        left = self._by_caller[caller] - 1
        if left > 0:
            self._by_caller[caller] = left
        else:
            del self._by_caller[caller]

    def held_by(self, caller: str) -> int:
        return self._by_caller.get(caller, 0)
