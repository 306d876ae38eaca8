"""The URL the agent's cards name: the configured ``url``, or where the caller reached it.

Without ``url`` the card is built for the bind address (``http://HOST:PORT``). Served on
its own that is right; mounted in a host app (``Mount("/agent", app=...)``) the agent is
reached at the host's address under ``/agent``, which is what its card must name for
clients to follow its interfaces. :class:`CardBase` rebases the cards it serves onto the
request's base URL (the listening socket plus ``root_path``, see
:func:`apcore_a2a.classify.base_url`), keeping a few rebased forms per card. Push
deliveries are signed with the same URL as issuer (:meth:`CardBase.url`), read when the
task's event is queued, in the context of the request that started or continued it.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.types import AgentCard
from cachetools import LRUCache

from apcore_a2a.adapters.agent_card import CardDocument, rebase_card, serialize_card
from apcore_a2a.classify import current_request

__all__ = ["CardBase"]


class CardBase:
    """Rebase served cards onto the request's base URL when no public ``url`` is set.

    *built_for* is the base the cards were built with; *fixed* says the operator set
    ``url`` (then nothing is rebased).
    """

    def __init__(self, built_for: str, *, fixed: bool) -> None:
        self.built_for = built_for.rstrip("/")
        self.fixed = fixed
        self._documents: LRUCache[tuple[int, str], tuple[CardDocument, CardDocument]] = LRUCache(
            maxsize=32
        )
        self._lock = threading.Lock()

    def base(self) -> str | None:
        """The base to name for the request being served, or ``None`` to keep the card's."""
        if self.fixed:
            return None
        info = current_request()
        base = info.base_url if info is not None else ""
        return base if base and base != self.built_for else None

    def url(self) -> str:
        """The agent's URL for the request being served (``iss`` of its push deliveries)."""
        return self.base() or self.built_for

    def document(self, current: Callable[[], CardDocument]) -> Callable[[], CardDocument]:
        """A card-document source rebased for the request being served."""

        def rebased() -> CardDocument:
            source = current()
            base = self.base()
            if base is None:
                return source
            key = (id(source), base)
            with self._lock:
                hit = self._documents.get(key)
                if hit is not None and hit[0] is source:
                    return hit[1]
            card = rebase_card(source.card, self.built_for, base)
            document = serialize_card(card, last_modified=source.last_modified)
            with self._lock:
                self._documents[key] = (source, document)
            return document

        return rebased

    def modifier(
        self, modify: Callable[[AgentCard, Any], Awaitable[AgentCard]] | None
    ) -> Callable[[AgentCard, Any], Awaitable[AgentCard]] | None:
        """An SDK ``extended_card_modifier`` whose result is rebased like the public card."""
        if modify is None or self.fixed:
            return modify
        inner = modify

        async def rebased(card: AgentCard, context: Any) -> AgentCard:
            result = await inner(card, context)
            base = self.base()
            return result if base is None else rebase_card(result, self.built_for, base)

        return rebased
