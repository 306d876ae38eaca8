"""Pure-ASGI request guard in front of the SDK routes.

It adds only what the SDK lacks:

* ``415`` for a POST whose Content-Type is not JSON, ``413`` for a body over the limit
  (checked on ``Content-Length`` and again while reading);
* ``-32700`` (JSON-RPC) or ``400`` (REST) for a body that is not UTF-8, is nested
  deeper than Python's JSON decoder goes, or (JSON-RPC) holds an unpaired surrogate
  escape, which the SDK would answer with -32603 or 500;
* the version rule for requests without an ``A2A-Version`` header: the SDK treats a
  missing header as 0.3 and rejects 1.0 method names with -32009. Here a 1.0 JSON-RPC
  method name (``SendMessage``...) or a 1.0 REST path is treated as 1.0, a 0.3 name
  (``message/send``...) or a ``/v1/...`` REST path as 0.3;
* a cap on concurrent SSE streams: the next one gets ``503`` with ``Retry-After: 5``
  before any task is created;
* ``cancel_on_disconnect``: when the client drops the only open stream of a task before
  the stream ended, the task is canceled (see :class:`StreamWatch`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from apcore_a2a.server._streams import DropHandler, StreamWatch, cancel_on_drop

__all__ = ["DropHandler", "RequestGuard", "StreamCounter", "StreamWatch", "cancel_on_drop"]

logger = logging.getLogger("apcore_a2a.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_V10_METHODS = frozenset(
    {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
    }
)
_STREAM_METHODS = frozenset(
    {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
)
_JSON_TYPES = ("application/json", "application/a2a+json")
_VERSION_HEADER = b"a2a-version"


class StreamCounter:
    """Counts open SSE streams (read by ``/metrics``)."""

    __slots__ = ("active", "rejected")

    def __init__(self) -> None:
        self.active = 0
        self.rejected = 0


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _is_json_type(value: bytes | None) -> bool:
    if value is None:
        return True  # lenient: absent Content-Type is treated as JSON
    media = value.split(b";", 1)[0].strip().decode("latin-1").lower()
    return media in _JSON_TYPES or media.endswith("+json")


async def _respond(
    send: Send,
    status: int,
    payload: dict[str, Any],
    extra: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
) -> None:
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _error(jsonrpc: bool, status: int, code: int, message: str) -> dict[str, Any]:
    if jsonrpc:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    names = {
        400: "INVALID_ARGUMENT",
        413: "PAYLOAD_TOO_LARGE",
        415: "INVALID_ARGUMENT",
        503: "UNAVAILABLE",
    }
    return {"error": {"code": status, "status": names.get(status, "ERROR"), "message": message}}


class RequestGuard:
    """See module docstring. *rpc_path* is the JSON-RPC endpoint path."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        rpc_path: str,
        max_body_bytes: int,
        max_streams: int,
        streams: StreamCounter | None = None,
        guarded_prefixes: tuple[str, ...] = (),
        on_stream_dropped: DropHandler | None = None,
    ) -> None:
        self.app = app
        self.rpc_path = rpc_path
        self.max_body = max_body_bytes
        self.max_streams = max_streams
        self.streams = streams or StreamCounter()
        # Paths not served by the A2A routes (explorer, health...) pass straight through.
        self.skip_prefixes = guarded_prefixes
        self.on_stream_dropped = on_stream_dropped
        #: open watched streams per task id (only with on_stream_dropped)
        self.task_streams: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/.well-known/") or any(path.startswith(p) for p in self.skip_prefixes):
            await self.app(scope, receive, send)
            return
        is_rpc = path == self.rpc_path
        missing_version = _header(scope, _VERSION_HEADER) is None
        if scope["method"] != "POST":
            if missing_version and not is_rpc:
                self._set_version(scope, b"0.3" if path.startswith("/v1/") else b"1.0")
            if path.endswith(":subscribe"):
                await self._stream(scope, receive, send, jsonrpc=False)
                return
            await self.app(scope, receive, send)
            return

        if not _is_json_type(_header(scope, b"content-type")):
            await _respond(
                send, 415, _error(is_rpc, 415, -32600, "Unsupported Content-Type: send JSON")
            )
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _respond(send, 413, _error(is_rpc, 413, -32600, "Payload too large"))
            return
        body = await self._read_body(receive)
        if body is None:
            await _respond(send, 413, _error(is_rpc, 413, -32600, "Payload too large"))
            return

        streaming = False
        if is_rpc:
            try:
                parsed = json.loads(body)
            except (UnicodeDecodeError, RecursionError) as exc:
                # The SDK's JSON-RPC dispatcher only maps JSONDecodeError to -32700;
                # these two would reach the client as -32603 or an HTTP 500.
                await _respond(send, 200, _error(True, 200, -32700, _parse_error(exc)))
                return
            except ValueError:
                parsed = None  # the SDK answers -32700
            if _SURROGATE_HINT.search(body) and _has_lone_surrogate(parsed):
                # The SDK echoes such strings in its errors and then fails to encode its
                # own answer (-32603, or HTTP 500 for an id).
                await _respond(send, 200, _error(True, 200, -32700, _LONE_SURROGATE))
                return
            method: Any = parsed.get("method") if isinstance(parsed, dict) else None
            if method is not None and "id" not in parsed:
                # A2A has no notifications: every call expects an answer.
                await _respond(
                    send, 200, _error(True, 200, -32600, "Invalid Request: 'id' is required")
                )
                return
            if missing_version and isinstance(method, str):
                self._set_version(scope, b"1.0" if method in _V10_METHODS else b"0.3")
            streaming = method in _STREAM_METHODS
        else:
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as exc:
                # The SDK's REST dispatcher decodes outside its error handling (HTTP 500).
                await _respond(send, 400, _error(False, 400, -32700, _parse_error(exc)))
                return
            if missing_version:
                self._set_version(scope, b"0.3" if path.startswith("/v1/") else b"1.0")
            streaming = path.endswith((":stream", ":subscribe"))

        replay = _replay(body, receive)
        if streaming:
            await self._stream(scope, replay, send, jsonrpc=is_rpc)
        else:
            await self.app(scope, replay, _without_internal_details(send) if is_rpc else send)

    async def _stream(self, scope: Scope, receive: Receive, send: Send, *, jsonrpc: bool) -> None:
        counter = self.streams
        if counter.active >= self.max_streams:
            counter.rejected += 1
            await _respond(
                send,
                503,
                _error(jsonrpc, 503, -32603, "Too many concurrent streams; retry later"),
                [(b"retry-after", b"5")],
            )
            return
        counter.active += 1
        watch = StreamWatch(self.task_streams) if self.on_stream_dropped is not None else None
        try:
            if watch is None:
                await self.app(scope, receive, send)
            else:
                await self.app(scope, watch.wrap_receive(receive), watch.wrap_send(send))
        finally:
            counter.active -= 1
            if watch is not None and watch.close() and self.on_stream_dropped is not None:
                assert watch.task_id is not None
                await self.on_stream_dropped(scope, watch.task_id)

    async def _read_body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @staticmethod
    def _set_version(scope: Scope, version: bytes) -> None:
        scope["headers"] = [*scope["headers"], (_VERSION_HEADER, version)]


_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
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
    return "Parse error: body is not valid UTF-8 JSON"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _without_internal_details(send: Send) -> Send:
    """Replace the text of JSON-RPC -32603 answers with "Internal error".

    The SDK answers unexpected server exceptions (a failing database, say) with -32603
    carrying ``str(exc)``, which can hold paths, SQL or credentials. The exception is
    already logged server-side; the client gets the generic message.
    """
    start: Message | None = None

    async def wrapped(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if start is not None:
            body = message.get("body", b"")
            if not message.get("more_body", False) and b"-32603" in body:
                cleaned = _generic_internal_error(body)
                if cleaned is not None:
                    headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                    headers.append((b"content-length", str(len(cleaned)).encode()))
                    start = {**start, "headers": headers}
                    message = {**message, "body": cleaned}
            await send(start)
            start = None
        await send(message)

    return wrapped


def _generic_internal_error(body: bytes) -> bytes | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict) or error.get("code") != -32603:
        return None
    payload["error"] = {"code": -32603, "message": "Internal error"}
    return json.dumps(payload).encode()
