"""Serve the agent card from pre-serialized bytes (1.0 and legacy 0.3 paths).

The SDK's card route serializes the card on every request; ours reads the bytes the
catalog prepared when the skill list last changed, and answers ``If-None-Match`` with 304.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.adapters.agent_card import CardDocument

__all__ = ["CARD_PATH", "LEGACY_CARD_PATH", "card_routes"]

CARD_PATH = "/.well-known/agent-card.json"
LEGACY_CARD_PATH = "/.well-known/agent.json"
CACHE_CONTROL = "public, max-age=300"


def _matches(header: str, etag: str) -> bool:
    bare = etag.removeprefix("W/")
    return any(c.strip() == "*" or c.strip().removeprefix("W/") == bare for c in header.split(","))


def _endpoint(current: Callable[[], CardDocument], legacy: bool) -> Callable[..., object]:
    async def card(request: Request) -> Response:
        document = current()
        body, etag = (
            (document.legacy_body, document.legacy_etag)
            if legacy
            else (document.body, document.etag)
        )
        headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL, "Vary": "Accept-Encoding"}
        inm = request.headers.get("if-none-match")
        if inm and _matches(inm, etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    return card


def card_routes(current: Callable[[], CardDocument]) -> list[Route]:
    """Routes for ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``."""
    return [
        Route(CARD_PATH, _endpoint(current, legacy=False), methods=["GET"]),
        Route(LEGACY_CARD_PATH, _endpoint(current, legacy=True), methods=["GET"]),
    ]
