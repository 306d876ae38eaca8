"""Where a2a-sdk 1.3 answers differently from the A2A 1.0 spec, the spec's answer.

Three corrections, each made in our layer and watched by a test that fails when the SDK
changes (``tests/interop/test_conformance.py``):

* **Error mapping** (spec §5.4): the SDK maps ``TaskNotCancelableError`` to HTTP 400,
  ``ContentTypeNotSupportedError`` to 400 and ``InvalidAgentResponseError`` to 500, and
  ``PushNotificationNotSupportedError``, ``UnsupportedOperationError`` and
  ``VersionNotSupportedError`` to gRPC ``FAILED_PRECONDITION``. The spec says 409, 415,
  502 and ``UNIMPLEMENTED``. :func:`apcore_a2a.errors.register` sets the spec's values in
  the SDK's two tables (the one its HTTP error handlers read and the one its gRPC handlers
  read); the JSON-RPC codes and the ``ErrorInfo`` reasons, which clients map errors by,
  are unchanged.
* **gRPC version check** (spec §3.6.2, GRPC-ERR-002): the SDK's gRPC handlers never look
  at ``a2a-version``. :func:`grpc_version_error` gives the ``VersionNotSupportedError`` for
  a version the called service does not speak (the service name says which protocol it
  is, so a call without the header is served).
* **REST media type** (spec §11.1, HTTP_JSON-SVC-001): the SDK answers REST calls with
  ``application/a2a+json``. The HTTP+JSON binding's requirement is ``application/json``
  for requests and responses (``application/a2a+json`` is registered in §14.1 but the
  binding names ``application/json``); :class:`RestMediaType` answers ``application/json``
  unless the caller's ``Accept`` admits only ``application/a2a+json``.
"""

from __future__ import annotations

from a2a.utils.errors import (
    A2AError,
    VersionNotSupportedError,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import request_info

__all__ = ["RestMediaType", "grpc_version_error"]


def grpc_version_error(service_major: str, announced: str | None) -> A2AError | None:
    """The error for a gRPC call announcing *announced* to a service of *service_major*.

    ``None`` when the call may proceed: no version announced (the service name states the
    protocol), or one with the service's major version (minor versions are compatible).
    """
    value = (announced or "").strip()
    if not value or value.split(".", 1)[0] == service_major:
        return None
    shown = value[:20]
    return VersionNotSupportedError(
        message=f"A2A version {shown!r} is not supported by this service "
        f"(it speaks {service_major}.x)"
    )


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


class RestMediaType:
    """ASGI middleware: REST answers carry ``application/json`` (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
