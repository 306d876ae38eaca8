"""Serve the agent card from pre-serialized bytes (1.0 and legacy 0.3 paths).

The SDK's card route serializes the card on every request; ours reads the bytes the
catalog prepared when the skill list last changed and answers conditional requests
(``If-None-Match`` first, else ``If-Modified-Since``, as RFC 9110 orders them) with 304.
Without a configured ``url``, :class:`CardBase` rebases the served cards (and the issuer
of push deliveries) onto the request's base URL: mounted under ``/agent`` in a host app,
the card names the host's address and ``/agent``.

``/.well-known/agent-card.json`` serves callers announcing ``1.x`` (``A2A-Version`` header,
or the query parameter the spec allows) the pure 1.0 card; no version (0.3 to the spec) or
``0.x`` gets the 1.0 card with the 0.3 keys merged in. ``Vary: A2A-Version`` keeps caches
from mixing the two.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from email.utils import formatdate, parsedate_to_datetime
from typing import Any

from a2a.types import AgentCard
from cachetools import LRUCache
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.adapters.agent_card import CardDocument, rebase_card, serialize_card
from apcore_a2a.classify import CARD_PATHS, current_request

CACHE_CONTROL = "public, max-age=300"


def wants_v1_card(request: Request) -> bool:
    """True when the caller announced protocol version 1.x or later: the header, or the
    query parameter, as the request's record has it (``upstream/version_param.py``). A
    major is ASCII digits, as the version rule reads one (``int()`` of a superscript one,
    or of 5,000 digits, raised: HTTP 500)."""
    info = current_request()
    sent = info.announced if info is not None else request.headers.get("a2a-version", "")
    major = sent.strip().split(".", 1)[0]
    return major.isascii() and major.isdigit() and major.strip("0") != ""


def _matches(header: str, etag: str) -> bool:
    bare = etag.removeprefix("W/")
    return any(c.strip() == "*" or c.strip().removeprefix("W/") == bare for c in header.split(","))


def _not_modified_since(header: str, last_modified: float) -> bool:
    try:
        since = parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return False  # an unparsable date is ignored, as RFC 9110 requires
    return int(last_modified) <= since


def _endpoint(current: Callable[[], CardDocument], legacy: bool) -> Callable[..., object]:
    async def card(request: Request) -> Response:
        document = current()
        if legacy:
            body, etag = document.legacy_body, document.legacy_etag
        elif wants_v1_card(request):
            body, etag = document.v1_body, document.v1_etag
        else:
            body, etag = document.body, document.etag
        headers = {
            "ETag": etag,
            "Last-Modified": formatdate(int(document.last_modified), usegmt=True),
            "Cache-Control": CACHE_CONTROL,
            "Vary": "Accept-Encoding" if legacy else "A2A-Version, Accept-Encoding",
        }
        inm = request.headers.get("if-none-match")
        ims = request.headers.get("if-modified-since")
        if (inm and _matches(inm, etag)) or (
            inm is None and ims and _not_modified_since(ims, document.last_modified)
        ):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    return card


def card_routes(current: Callable[[], CardDocument]) -> list[Route]:
    """Routes for ``/.well-known/agent-card.json`` and (legacy) ``/.well-known/agent.json``."""
    return [Route(p, _endpoint(current, legacy=p != CARD_PATHS[0])) for p in CARD_PATHS]


class CardBase:
    """Rebase served cards built for *built_for* onto the request's base URL, unless the
    operator set ``url`` (*fixed*)."""

    def __init__(self, built_for: str, *, fixed: bool) -> None:
        self.built_for = built_for.rstrip("/")
        self.fixed = fixed
        self._documents: LRUCache[tuple[int, str], tuple[CardDocument, CardDocument]] = LRUCache(
            maxsize=32
        )

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
            # Only the event loop's thread serves cards: the cache needs no lock.
            key = (id(source), base)
            hit = self._documents.get(key)
            if hit is not None and hit[0] is source:
                return hit[1]
            card = rebase_card(source.card, self.built_for, base)
            document = serialize_card(card, last_modified=source.last_modified)
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
