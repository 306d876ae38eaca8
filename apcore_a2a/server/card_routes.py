"""Serve the agent card from pre-serialized bytes (1.0 and legacy 0.3 paths).

The SDK's card route serializes the card on every request; ours reads the bytes the
catalog prepared when the skill list last changed, and answers conditional requests
(``If-None-Match`` first, else ``If-Modified-Since``, as RFC 9110 orders them) with 304.

Which form ``/.well-known/agent-card.json`` serves depends on the protocol version the
client announces (``A2A-Version`` header, or the ``A2A-Version`` query parameter the spec
allows instead): ``1.x`` gets the pure 1.0 card, valid against the 1.0 ``AgentCard``
schema; no version (which the spec reads as 0.3) or ``0.x`` gets the 1.0 card with the 0.3
keys merged in, so 0.3 clients still find their bindings. ``Vary: A2A-Version`` keeps
caches from mixing the two.
"""

from __future__ import annotations

from collections.abc import Callable
from email.utils import formatdate, parsedate_to_datetime

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.adapters.agent_card import CardDocument

__all__ = ["CARD_PATH", "LEGACY_CARD_PATH", "card_routes", "wants_v1_card"]

CARD_PATH = "/.well-known/agent-card.json"
LEGACY_CARD_PATH = "/.well-known/agent.json"
CACHE_CONTROL = "public, max-age=300"
_VERSION = "a2a-version"


def wants_v1_card(request: Request) -> bool:
    """True when the caller announced protocol version 1.x (header first, then query)."""
    value = request.headers.get(_VERSION)
    if value is None:
        value = next((v for k, v in request.query_params.items() if k.lower() == _VERSION), "")
    major = value.strip().split(".", 1)[0]
    return major.isdigit() and int(major) >= 1


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
    """Routes for ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``."""
    return [
        Route(CARD_PATH, _endpoint(current, legacy=False), methods=["GET"]),
        Route(LEGACY_CARD_PATH, _endpoint(current, legacy=True), methods=["GET"]),
    ]
