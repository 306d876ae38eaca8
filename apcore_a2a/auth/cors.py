"""CORS for browser clients, via Starlette's ``CORSMiddleware``."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

__all__ = ["CORS_ALLOW_HEADERS", "CORS_ALLOW_METHODS", "cors_middleware"]

logger = logging.getLogger("apcore_a2a.auth")

CORS_ALLOW_METHODS = ("GET", "POST", "OPTIONS")
#: Authorization/Content-Type plus the A2A protocol headers SDK clients send.
CORS_ALLOW_HEADERS = (
    "Authorization",
    "Content-Type",
    "A2A-Version",
    "A2A-Extensions",
    "X-A2A-Extensions",
    "Last-Event-ID",
)


def cors_middleware(
    origins: Sequence[str], *, extra_headers: Iterable[str] = ()
) -> Middleware | None:
    """A ``CORSMiddleware`` entry for *origins*, or ``None`` when the list is empty.

    Put it outermost (before authentication) so preflight requests are answered without
    credentials and 401 responses still carry CORS headers. ``*`` is allowed but logged
    at WARNING. Credentials (cookies) are never allowed; tokens travel in headers.
    *extra_headers* adds request headers to allow, e.g. an API key header.
    """
    allowed = [o.strip().rstrip("/") for o in origins if o and o.strip()]
    if not allowed:
        return None
    if "*" in allowed:
        logger.warning(
            "CORS allows any origin ('*'); any web page can call this agent from a browser"
        )
        allowed = ["*"]
    headers = list(dict.fromkeys([*CORS_ALLOW_HEADERS, *extra_headers]))
    return Middleware(
        CORSMiddleware,
        allow_origins=allowed,
        allow_methods=list(CORS_ALLOW_METHODS),
        allow_headers=headers,
        allow_credentials=False,
        expose_headers=["WWW-Authenticate", "ETag"],
        max_age=600,
    )
