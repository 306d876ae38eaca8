"""Counting A2A requests (ops middleware); what a request is comes from its record."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from apcore_a2a.classify import request_info

__all__ = ["RequestWatch"]


class RequestWatch:
    """ASGI middleware: calls *on_request* once per A2A request (not card, health...)."""

    def __init__(self, app: ASGIApp, *, on_request: Callable[[], None] | None = None) -> None:
        self.app = app
        self.on_request = on_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_request is not None and scope["type"] == "http":
            info = request_info(scope)
            if info is not None and info.is_a2a:
                self.on_request()
        await self.app(scope, receive, send)
