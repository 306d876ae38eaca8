"""REST answers carry ``application/json`` (spec §11.1, HTTP_JSON-SVC-001).

a2a-sdk 1.3 answers REST calls with ``application/a2a+json`` (registered in §14.1, but the
HTTP+JSON binding names ``application/json``): :class:`RestMediaType` answers
``application/json`` unless the caller's ``Accept`` admits only ``application/a2a+json``.
``tests/upstream/test_rest_media_type.py`` fails when the SDK changes its media type.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info

_A2A_JSON = b"application/a2a+json"
_JSON = b"application/json"


def _only_a2a_json(accept: bytes | None) -> bool:
    """True when *accept* admits ``application/a2a+json`` but not ``application/json``."""
    if not accept:
        return False
    ranges = []
    for item in accept.lower().split(b","):
        media, _, params = item.strip().partition(b";")
        quality = 1.0
        for param in params.split(b";"):
            key, _, value = param.strip().partition(b"=")
            if key == b"q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            ranges.append(media.strip())
    plain = any(r in (_JSON, b"application/*", b"*/*") for r in ranges)
    return _A2A_JSON in ranges and not plain


@dataclass
class RestMediaType:
    """ASGI middleware: REST answers carry ``application/json`` (see the module docstring)."""

    app: ASGIApp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or info.binding != "rest":
            await self.app(scope, receive, send)
            return
        accept = next((v for k, v in scope["headers"] if k == b"accept"), None)
        if _only_a2a_json(accept):
            await self.app(scope, receive, send)
            return

        async def send_json(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (key, _JSON + value[len(_A2A_JSON) :])
                    if key.lower() == b"content-type" and value.startswith(_A2A_JSON)
                    else (key, value)
                    for key, value in message.get("headers", ())
                ]
            await send(message)

        await self.app(scope, receive, send_json)
