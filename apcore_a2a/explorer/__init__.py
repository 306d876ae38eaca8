"""The Explorer: a self-contained browser UI to discover and try the agent's skills.

Mount it with :func:`explorer_routes`; the page then talks to the agent like any other
A2A client (agent card + JSON-RPC 1.0), so it needs no server-side state of its own.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

__all__ = ["SECURITY_HEADERS", "explorer_routes"]

_HERE = Path(__file__).resolve().parent
_PAGE_TEMPLATE = _HERE / "page.html"
_PREFIX_RE = re.compile(r"^(/[A-Za-z0-9._~-]+)+$")

_CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        # data:/blob: let the page preview and download files the agent returned.
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)

#: Headers sent with every Explorer response (page and assets).
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": _CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=()",
}

# Module scripts are refused unless served with a JavaScript type, and the platform's
# mimetypes table is not reliable for that (some hosts map .js to text/plain).
_MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


class _Assets(StaticFiles):
    """StaticFiles with fixed media types for the asset kinds the page uses, and *headers*
    on every response (with ``html`` off, each one comes from ``file_response``)."""

    headers: dict[str, str] = {}

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        media_type = _MEDIA_TYPES.get(Path(full_path).suffix)
        if media_type and response.status_code != 304:
            response.headers["content-type"] = media_type
        response.headers.update(self.headers)
        return response


def explorer_routes(prefix: str = "/explorer") -> list[BaseRoute]:
    """Routes serving the Explorer UI under *prefix*.

    ``GET <prefix>`` redirects to ``<prefix>/`` (the page); ``<prefix>/<asset>`` serves the
    bundled JavaScript, CSS and icon. Every response carries :data:`SECURITY_HEADERS`
    (a CSP that allows only this origin) and ``Cache-Control: no-cache`` with an ETag.
    The routes perform no authentication: the page is public, the agent calls it makes
    carry the user's token and are checked by the agent as usual.

    Put these routes before the SDK's REST routes, whose ``/{tenant}`` mount would
    otherwise capture ``<prefix>/...``.
    """
    if not _PREFIX_RE.match(prefix.rstrip("/")):
        raise ValueError(
            f"explorer prefix must be a non-root URL path like '/explorer', got {prefix!r}"
        )
    prefix = prefix.rstrip("/")
    # The page lives at "<prefix>/"; climbing one level per prefix segment reaches the app
    # root, which keeps the card URL right behind a proxy that adds a root path.
    card_url = html.escape("../" * prefix.count("/") + ".well-known/agent-card.json", quote=True)
    page = _PAGE_TEMPLATE.read_text(encoding="utf-8").replace("%CARD_URL%", card_url).encode()
    etag = '"' + hashlib.sha256(page).hexdigest()[:32] + '"'
    # Asset names are not fingerprinted (no build step), so browsers must revalidate; the
    # ETag turns that into a cheap 304.
    headers = {**SECURITY_HEADERS, "cache-control": "no-cache"}
    last_segment = prefix.rsplit("/", 1)[-1]

    async def redirect_to_page(request: Request) -> Response:
        # A relative Location keeps working when the app is mounted under a root path.
        location = last_segment + "/"
        if request.url.query:
            location += "?" + request.url.query
        return Response(status_code=308, headers={**headers, "location": location})

    async def page_endpoint(request: Request) -> Response:
        if_none_match = request.headers.get("if-none-match", "")
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        if etag in tags:
            return Response(status_code=304, headers={**headers, "etag": etag})
        return Response(
            page, media_type="text/html; charset=utf-8", headers={**headers, "etag": etag}
        )

    assets = _Assets(directory=_HERE / "static")
    assets.headers = headers
    return [
        Route(prefix, redirect_to_page, methods=["GET", "HEAD"], name="explorer_redirect"),
        Route(prefix + "/", page_endpoint, methods=["GET", "HEAD"], name="explorer_page"),
        Mount(prefix, app=assets, name="explorer_assets"),
    ]
