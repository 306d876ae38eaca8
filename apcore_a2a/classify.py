"""Which A2A call is this HTTP request? Decided once, recorded in the ASGI scope.

:class:`Classifier` (pure ASGI, outermost of the A2A layers) looks at the path (without the
mount's ``root_path``), the HTTP method and the ``A2A-Version`` header, and stores a
:class:`RequestInfo` at ``scope[REQUEST_KEY]``: the kind of endpoint, the binding, the
protocol version, the A2A method (1.0 names whatever the binding and version), the tenant
and whether the answer streams. Guards, auth, quotas, metrics, telemetry and error
scrubbing read that record; none of them parses paths, method tables or bodies again.

A JSON-RPC request's method is in its body: :meth:`RequestInfo.load_body` reads the body
once (bounded), and :attr:`RequestInfo.payload` parses it once, on first use; the SDK's
JSON-RPC route is handed the same parsed object (see ``server/routes``).

Reserved paths -- the card and JWKS paths, the Explorer prefix, ``/health``, ``/metrics``,
``v1`` -- can never be taken for a REST tenant: an A2A route under one
(``/.well-known/message:send``) is recorded as not routable (the guard checks it like any
A2A request, then answers 404), anything else under one is answered 404 here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CARD_PATHS",
    "HEALTH_PATH",
    "JWKS_PATH",
    "METRICS_PATH",
    "REQUEST_KEY",
    "STREAMING_METHODS",
    "Classifier",
    "RequestInfo",
    "Routes",
    "base_url",
    "current_request",
    "request_info",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

Kind = Literal["a2a", "card", "jwks", "explorer", "health", "metrics", "other"]
Binding = Literal["jsonrpc", "rest"]

#: Scope key of the :class:`RequestInfo`.
REQUEST_KEY = "apcore_a2a.request"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
JWKS_PATH = "/.well-known/jwks.json"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"
VERSION_HEADER = b"a2a-version"

#: JSON-RPC method name -> (A2A 1.0 method name, protocol version of the name).
JSONRPC_METHODS: dict[str, tuple[str, str]] = {
    **{
        name: (name, "1.0")
        for name in (
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
        )
    },
    "message/send": ("SendMessage", "0.3"),
    "message/stream": ("SendStreamingMessage", "0.3"),
    "tasks/get": ("GetTask", "0.3"),
    "tasks/cancel": ("CancelTask", "0.3"),
    "tasks/resubscribe": ("SubscribeToTask", "0.3"),
    "tasks/pushNotificationConfig/set": ("CreateTaskPushNotificationConfig", "0.3"),
    "tasks/pushNotificationConfig/get": ("GetTaskPushNotificationConfig", "0.3"),
    "tasks/pushNotificationConfig/list": ("ListTaskPushNotificationConfigs", "0.3"),
    "tasks/pushNotificationConfig/delete": ("DeleteTaskPushNotificationConfig", "0.3"),
    "agent/getAuthenticatedExtendedCard": ("GetExtendedAgentCard", "0.3"),
}
STREAMING_METHODS = frozenset({"SendStreamingMessage", "SubscribeToTask"})

_ID = r"[^/]+"
# (HTTP method, path pattern after an optional tenant or the /v1 prefix) -> A2A method.
_REST: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (verb, re.compile(pattern + r"\Z"), method)
    for verb, pattern, method in (
        ("POST", r"/message:send", "SendMessage"),
        ("POST", r"/message:stream", "SendStreamingMessage"),
        ("POST", rf"/tasks/{_ID}:cancel", "CancelTask"),
        ("GET", rf"/tasks/{_ID}:subscribe", "SubscribeToTask"),
        ("POST", rf"/tasks/{_ID}:subscribe", "SubscribeToTask"),
        ("GET", rf"/tasks/{_ID}/pushNotificationConfigs/{_ID}", "GetTaskPushNotificationConfig"),
        (
            "DELETE",
            rf"/tasks/{_ID}/pushNotificationConfigs/{_ID}",
            "DeleteTaskPushNotificationConfig",
        ),
        ("POST", rf"/tasks/{_ID}/pushNotificationConfigs", "CreateTaskPushNotificationConfig"),
        ("GET", rf"/tasks/{_ID}/pushNotificationConfigs", "ListTaskPushNotificationConfigs"),
        ("GET", rf"/tasks/(?!{_ID}:)({_ID})", "GetTask"),
        ("GET", r"/tasks", "ListTasks"),
        ("GET", r"/extendedAgentCard", "GetExtendedAgentCard"),
        ("GET", r"/card", "GetExtendedAgentCard"),
    )
)
_LEGACY_EXTENDED_CARD = "/agent/authenticatedExtendedCard"

_UNREAD = object()

#: the request being served (set by :class:`Classifier`; read where no scope is at hand,
#: e.g. inside an execution started by the request)
_current: ContextVar[RequestInfo | None] = ContextVar("apcore_a2a_request", default=None)


@dataclass(slots=True)
class RequestInfo:
    """What one HTTP request is, as far as the A2A layers are concerned.

    ``method`` is the A2A 1.0 method name (``SendMessage``...) whatever the binding and
    version, ``rpc_method`` the JSON-RPC name as sent; ``version`` is the header's, or the
    one the path or method name implies (``explicit_version`` tells which).
    """

    kind: Kind
    path: str
    http_method: str
    binding: Binding | None = None
    version: str | None = None
    explicit_version: bool = False
    method: str | None = None
    rpc_method: str | None = None
    tenant: str = ""
    body: bytes | None = None
    _payload: Any = field(default=_UNREAD, repr=False)
    parse_error: Exception | None = field(default=None, repr=False)
    #: the body was larger than the limit (what was read of it is gone)
    oversize: bool = False
    #: an Explorer page or file (``prefix``, ``prefix/``, ``prefix/name.ext``), GET only
    static_file: bool = False
    #: where this request reached the agent: ``scheme://host:port`` of the listening
    #: socket plus the mount's ``root_path`` (what the card names when no url is set)
    base_url: str = ""
    #: ``False`` for an A2A route under a reserved segment (``/.well-known/message:send``):
    #: it gets every check an A2A request gets, then 404 -- it is never a tenant
    routable: bool = True
    _delivered: bool = field(default=False, repr=False)

    @property
    def streaming(self) -> bool:
        return self.method in STREAMING_METHODS

    @property
    def is_a2a(self) -> bool:
        return self.kind == "a2a"

    @property
    def payload(self) -> Any:
        """The JSON-RPC body, parsed on first use (``None`` if absent or unparseable)."""
        if self._payload is _UNREAD:
            self._payload = None
            if self.body is not None and self.binding == "jsonrpc":
                try:
                    self._payload = json.loads(self.body)
                except (ValueError, RecursionError) as exc:
                    self.parse_error = exc
                self._name_rpc_method()
        return self._payload

    def _name_rpc_method(self) -> None:
        doc = self._payload
        name = doc.get("method") if isinstance(doc, dict) else None
        if not isinstance(name, str):
            return
        self.rpc_method = name
        known = JSONRPC_METHODS.get(name)
        if known is not None:
            self.method = known[0]
            if not self.explicit_version:
                self.version = known[1]

    def rewrite_payload(self, payload: Any) -> None:
        """Replace the JSON-RPC payload (and body) with one an inner layer adjusted."""
        self._payload = payload
        self.body = json.dumps(payload).encode("utf-8")
        self._delivered = False

    async def load_body(self, receive: Receive, limit: int) -> bool:
        """Read the whole body once (``False`` if it is larger than *limit* bytes)."""
        if self.body is not None or self.oversize:
            return not self.oversize
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                self.oversize = True
                return False
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        self.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        return True

    def replay(self, receive: Receive) -> Receive:
        """A ``receive`` that hands the loaded body on once, then delegates.

        However many layers wrap ``receive`` this way, the app gets the body once.
        """
        if self.body is None:
            return receive

        async def replayed() -> Message:
            if not self._delivered and self.body is not None:
                self._delivered = True
                return {"type": "http.request", "body": self.body, "more_body": False}
            return await receive()

        return replayed


def request_info(scope: Scope) -> RequestInfo | None:
    """The record :class:`Classifier` left in *scope*, if any."""
    info = scope.get(REQUEST_KEY)
    return info if isinstance(info, RequestInfo) else None


def current_request() -> RequestInfo | None:
    """The record of the HTTP request being served in this context, if any."""
    return _current.get()


def base_url(scope: Scope) -> str:
    """``scheme://host:port`` of the socket the request came in on, plus ``root_path``.

    The listening address, not the ``Host`` header, which the caller chooses.
    """
    server = scope.get("server")
    scheme = scope.get("scheme", "http")
    root = str(scope.get("root_path", "")).rstrip("/")
    if not server:
        return root
    host, port = server[0], server[1]
    if ":" in str(host):
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(scheme)
    address = host if port in (None, default) else f"{host}:{port}"
    return f"{scheme}://{address}{root}"


def route_path(scope: Scope) -> str:
    """The path the app routes on: ``scope["path"]`` without the mount's ``root_path``."""
    path: str = scope.get("path", "/")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


@dataclass(frozen=True, slots=True)
class Routes:
    """The agent's own paths, which decide what a request is."""

    rpc_path: str = "/"
    explorer_prefix: str | None = None

    @property
    def reserved_segments(self) -> frozenset[str]:
        """First path segments that are never a REST tenant."""
        names = {".well-known", "health", "metrics", "v1", "agent"}
        if self.explorer_prefix:
            names.add(self.explorer_prefix.strip("/").split("/", 1)[0])
        first = self.rpc_path.strip("/").split("/", 1)[0]
        if first:
            names.add(first)
        return frozenset(names)

    def classify(self, scope: Scope) -> RequestInfo | None:
        """The record for *scope*; ``None`` when the path misuses a reserved segment."""
        path = route_path(scope)
        verb: str = scope.get("method", "GET")
        if path in CARD_PATHS:
            return RequestInfo("card", path, verb)
        if path == JWKS_PATH:
            return RequestInfo("jwks", path, verb)
        if path == HEALTH_PATH:
            return RequestInfo("health", path, verb)
        if path == METRICS_PATH:
            return RequestInfo("metrics", path, verb)
        prefix = (self.explorer_prefix or "").rstrip("/")
        if prefix and (path == prefix or path.startswith(prefix + "/")):
            info = RequestInfo("explorer", path, verb)
            last = path[len(prefix) :].rsplit("/", 1)[-1]
            file_like = "." in last.strip(".") and ":" not in last
            info.static_file = verb in ("GET", "HEAD") and (last == "" or file_like)
            return info
        if path == self.rpc_path or (self.rpc_path != "/" and path == self.rpc_path + "/"):
            info = RequestInfo("a2a", path, verb, binding="jsonrpc")
            return _with_header_version(info, scope)
        if path == _LEGACY_EXTENDED_CARD:
            info = RequestInfo("a2a", path, verb, binding="rest", method="GetExtendedAgentCard")
            info.version = "0.3"
            return _with_header_version(info, scope)
        return self._rest(scope, path, verb)

    def _rest(self, scope: Scope, path: str, verb: str) -> RequestInfo | None:
        segments = path.split("/", 2)
        first = segments[1] if len(segments) > 1 else ""
        if first == "v1":
            candidates = [("", "0.3", path[3:])]
        else:
            candidates = [("", "1.0", path)]
            if len(segments) == 3 and first:
                # The SDK also mounts every 1.0 route under a "/{tenant}" segment.
                candidates.append((first, "1.0", "/" + segments[2]))
        for tenant, version, rest in candidates:
            method = _rest_method(verb, rest, version)
            if method is None:
                continue
            info = RequestInfo("a2a", path, verb, binding="rest", method=method)
            if tenant in self.reserved_segments:
                info.routable = False
                tenant = ""
            info.tenant = tenant
            info.version = version
            return _with_header_version(info, scope)
        if len(segments) == 3 and first in self.reserved_segments:
            return None  # e.g. /.well-known/anything: never routed to a tenant
        return RequestInfo("other", path, verb)


def _rest_method(verb: str, rest: str, version: str) -> str | None:
    verb = "GET" if verb == "HEAD" else verb
    for route_verb, pattern, method in _REST:
        if route_verb != verb or not pattern.match(rest):
            continue
        if method == "GetExtendedAgentCard" and (rest == "/card") != (version == "0.3"):
            continue
        if method == "ListTasks" and version == "0.3":
            continue  # 0.3 has no list
        return method
    return None


def _with_header_version(info: RequestInfo, scope: Scope) -> RequestInfo:
    for key, value in scope.get("headers", ()):
        if key == VERSION_HEADER:
            info.version = bytes(value).decode("latin-1").strip() or info.version
            info.explicit_version = True
            break
    return info


class Classifier:
    """ASGI middleware: classify each HTTP request once (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, routes: Routes) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        info = self.routes.classify(scope)
        if info is None:
            await _not_found(send)
            return
        info.base_url = base_url(scope)
        scope[REQUEST_KEY] = info
        token = _current.set(info)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)


async def _not_found(send: Send) -> None:
    body = b'{"error":{"code":404,"status":"NOT_FOUND","message":"Not Found"}}'
    await send(
        {
            "type": "http.response.start",
            "status": 404,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
