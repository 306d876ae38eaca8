"""``/.well-known/jwks.json``: one JSON Web Key Set for every public key the agent uses.

Card signatures and push-delivery signatures are made with different keys; receivers
and clients find each by ``kid`` in this one document. Sources that have no key yet
(loaded at start-up) are skipped; until some source has one, the endpoint answers 503.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apcore_a2a.keys.card_signing import JWKS_PATH

__all__ = ["jwks_document", "jwks_route"]

KeySource = Callable[[], dict[str, Any] | None]


def jwks_document(sources: Sequence[KeySource]) -> dict[str, Any]:
    """``{"keys": [...]}`` from every source that has a key, one entry per ``kid``."""
    keys: dict[str, dict[str, Any]] = {}
    for source in sources:
        jwk = source()
        if jwk is not None:
            keys.setdefault(str(jwk.get("kid")), jwk)
    return {"keys": list(keys.values())}


def jwks_route(sources: Sequence[KeySource]) -> Route:
    """The ``GET /.well-known/jwks.json`` route over *sources* (cacheable for 5 minutes)."""

    async def endpoint(request: Request) -> Response:
        document = jwks_document(sources)
        if not document["keys"]:
            return JSONResponse({"error": "signing keys not loaded yet"}, status_code=503)
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=300"})

    return Route(JWKS_PATH, endpoint, methods=["GET"], name="jwks")
