"""Which message of a task's history a messageId names: the one rule the follow-up checks,
the approval turns and the seam share (a leaf: it imports nothing of ours, so every room
may import it)."""

from __future__ import annotations

from collections.abc import Iterable

from a2a.types import Message


def message_in(history: Iterable[Message], message_id: str) -> Message | None:
    """The message of *history* whose id is *message_id* (``None``: it holds none)."""
    return next((m for m in history if m.message_id == message_id), None)
