"""Pure-ASGI request guard on every route (it acts on A2A routes), reading the request
record the matched route made (:mod:`apcore_a2a.classify`). It adds what the SDK lacks:

* ``415`` for a POST with a body that is not JSON, also without Content-Type (what a
  cross-origin page sends unasked; body-less POSTs such as ``:cancel`` need none); ``413``
  for a body over the limit (on ``Content-Length`` and again while reading);
* ``-32700`` (JSON-RPC) or ``400`` (REST) for a body that is not UTF-8, nested deeper than
  Python's decoder goes, or (JSON-RPC) with an unpaired surrogate escape or no ``id``
  (the SDK: -32603, HTTP 500, or no answer);
* ``-32602`` (JSON-RPC) or ``400`` (REST) for a body beyond a shape limit
  (:mod:`apcore_a2a.shape`), before anything parses it;
* without ``A2A-Version`` (0.3 to the SDK), a 1.0 method name or REST path is served as 1.0;
* stream limits (:class:`~apcore_a2a.server.limits.StreamLimiter`): over the agent's cap
  ``503`` + ``Retry-After``, over the caller's quota ``429`` (``QuotaExceededError``).

The answer side (scrubbing, SSE event ids, cancel-on-drop) is :mod:`apcore_a2a.streams`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a.classify import VERSION_HEADER, RequestInfo, request_info
from apcore_a2a.errors import (
    RETRY_AFTER_KEY,
    WIRE_KEY,
    QuotaExceededError,
    StoreUnavailableError,
)
from apcore_a2a.execution.identity import IDENTITY_SCOPE_KEY, IdentityUser
from apcore_a2a.server.limits import GLOBAL_RETRY_AFTER, StreamLimiter

_JSON_TYPES = ("application/json", "application/a2a+json")
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    404: "NOT_FOUND",
    413: "PAYLOAD_TOO_LARGE",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def caller_of(scope: Scope) -> str:
    """The key quotas count by: the task owner, or ``ip:<address>`` for anonymous callers."""
    identity = scope.get(IDENTITY_SCOPE_KEY)
    if identity is not None:
        return IdentityUser(identity).user_name
    client = scope.get("client")
    return f"ip:{client[0]}" if client else "ip:unknown"


def _is_json_type(value: str | None) -> bool:
    media = (value or "").split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or media.endswith("+json")


def error_payload(info: RequestInfo, status: int, code: int, message: str) -> dict[str, Any]:
    """An error in the shape of the request's binding (JSON-RPC or REST)."""
    if info.binding == "jsonrpc":
        # JSON-RPC 2.0 §5: a request that could not be parsed has no id
        request_id = None if code == -32700 else info.request_id
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    name = _STATUS_NAMES.get(status, "ERROR")
    return {"error": {"code": status, "status": name, "message": message}}


def _not_found(info: RequestInfo) -> JSONResponse:
    return JSONResponse(error_payload(info, 404, -32601, "Not Found"), 404)


@dataclass
class RequestGuard:
    """See the module docstring."""

    app: ASGIApp
    max_body_bytes: int
    streams: StreamLimiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        info = request_info(scope) if scope["type"] == "http" else None
        if info is None or not info.is_a2a:
            await self.app(scope, receive, send)
            return
        rejection = await self._check(scope, info, receive)
        if rejection is not None:
            status, code, message = rejection
            await JSONResponse(error_payload(info, status, code, message), status)(
                scope, receive, send
            )
            return
        if not info.explicit_version and info.version is not None:
            scope["headers"] = [*scope["headers"], (VERSION_HEADER, info.version.encode())]
        receive = info.replay(receive)
        if info.streaming:
            await self._stream(scope, info, receive, send)
        elif info.routable:
            await self.app(scope, receive, send)
        else:
            await _not_found(info)(scope, receive, send)

    async def _check(
        self, scope: Scope, info: RequestInfo, receive: Receive
    ) -> tuple[int, int, str] | None:
        """``(HTTP status, JSON-RPC code, message)`` for a request to refuse, else ``None``."""
        if info.http_method != "POST":
            return None
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        has_body = length != "0" and (length is not None or "transfer-encoding" in headers)
        if has_body and not _is_json_type(headers.get("content-type")):
            # Also without any Content-Type: what a cross-origin page can send unasked.
            # -32005 ContentTypeNotSupported: the spec's only media-type error (JSONRPC-SSE-002).
            return 415, -32005, "Unsupported Content-Type: send JSON (application/json)"
        limit = self.max_body_bytes
        too_large = length is not None and length.isdigit() and int(length) > limit
        if too_large or not await info.load_body(receive, limit):
            return 413, -32600, "Payload too large"
        body = info.body or b""
        if info.shape_error is not None:
            status = 200 if info.binding == "jsonrpc" else 400
            return status, -32602, f"Invalid params: {info.shape_error}"
        if info.binding == "rest":
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                # The SDK's REST dispatcher decodes outside its error handling (HTTP 500).
                return 400, -32700, "Parse error: body is not valid UTF-8 JSON"
            return None
        payload = info.payload
        if info.parse_error is not None:
            # The SDK maps only JSONDecodeError to -32700; these reach it as -32603 or 500.
            return 200, -32700, _parse_error(info.parse_error)
        hint = any(p.search(body) for p in _SURROGATE_HINTS)
        if hint and _has_lone_surrogate(payload):
            # The SDK echoes such strings in its errors, then fails to encode its own answer.
            return 200, -32700, _LONE_SURROGATE
        if isinstance(payload, dict) and "method" in payload and "id" not in payload:
            return 200, -32600, "Invalid Request: 'id' is required (A2A has no notifications)"
        return None

    async def _stream(self, scope: Scope, info: RequestInfo, receive: Receive, send: Send) -> None:
        caller = caller_of(scope)
        try:
            refusal = await self.streams.acquire(caller)
        except StoreUnavailableError as unavailable:  # cluster mode: the slots are stored
            payload = error_payload(info, 503, unavailable.wire.code, unavailable.message)
            payload["error"]["data"] = unavailable.data
            retry = unavailable.data[RETRY_AFTER_KEY]  # type: ignore[index]
            await JSONResponse(payload, 503, {"retry-after": str(retry)})(scope, receive, send)
            return
        if refusal is not None:
            if refusal.scope == "agent":
                payload = error_payload(info, 503, -32603, refusal.message)
                status, retry = 503, GLOBAL_RETRY_AFTER
            else:
                error = QuotaExceededError(refusal.message)
                payload = error_payload(info, 429, error.wire.code, refusal.message)
                # Sent past the answer side's scrubbing: without our marker (errors.WIRE_KEY).
                data = {k: v for k, v in (error.data or {}).items() if k != WIRE_KEY}
                payload["error"]["data"] = data
                status, retry = 429, data[RETRY_AFTER_KEY]
            await JSONResponse(payload, status, {"retry-after": str(retry)})(scope, receive, send)
            return
        released = False
        respond_to = send

        async def release() -> None:
            nonlocal released
            if not released:
                released = True
                await self.streams.release(caller)

        async def ending(message: Message) -> None:
            # The slot is free once the last chunk leaves: the caller may open its next
            # stream at once, before the app below has finished tearing this one down.
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await release()
            await respond_to(message)

        try:
            if not info.routable:
                await _not_found(info)(scope, receive, ending)
            else:
                await self.app(scope, receive, ending)
        finally:
            await release()


# Two patterns, each with a literal start the regex engine finds at memchr speed (one
# pattern with both alternatives scans a 10 MB body byte by byte, for a quarter second).
_SURROGATE_HINTS = (re.compile(rb"\\u[dD][89a-fA-F]"), re.compile(rb"\xed[\xa0-\xbf]"))
_LONE_SURROGATE = "Parse error: a string holds an unpaired UTF-16 surrogate"


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse_error(exc: Exception) -> str:
    if isinstance(exc, RecursionError):
        return "Parse error: JSON nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return "Parse error: body is not valid UTF-8 JSON"
    return "Parse error: body is not valid JSON"
