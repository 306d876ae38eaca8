"""Which A2A call is this HTTP request? The route Starlette matched says so.

:func:`layered` runs, on every route once it matched, :class:`Recorder` (it stores the
:class:`RequestInfo` of the route's call at ``scope[REQUEST_KEY]``) and then the layers
that read it, so however a path is spelled, a request reaches an endpoint only through
them. A JSON-RPC body is read once (bounded in size and shape) and parsed once, the SDK's
route included (``upstream/parsed_body``). Reserved first segments are never a REST
tenant: an A2A route of the SDK's ``/{tenant}`` mount under one is checked like any A2A
request, then answered 404.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

from a2a.utils.errors import VersionNotSupportedError
from packaging.version import Version
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apcore_a2a._json import load_json, utf8_json
from apcore_a2a._text import echoed
from apcore_a2a.shape import Shape, ShapeError, scan
from apcore_a2a.upstream.exact_mounts import ExactMount
from apcore_a2a.upstream.version_param import version_from_param

Kind = Literal["a2a", "card", "jwks", "push", "explorer", "health", "metrics", "other"]
Binding = Literal["jsonrpc", "rest"]

#: Scope key of the :class:`RequestInfo`.
REQUEST_KEY = "apcore_a2a.request"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
#: Where the agent publishes its public keys (card and push-delivery signatures).
JWKS_PATH = "/.well-known/jwks.json"
#: The delivery status of a task's push configs, for their owner (``push.status_route``):
#: not an A2A method, admitted like one (kind ``"push"``), its errors answered as REST 1.0's.
PUSH_STATUS_PATH = "/push/status/{task_id}"
HEALTH_PATH = "/health"
METRICS_PATH = "/metrics"

#: (path template, HTTP method) of the SDK's 1.0 REST routes -> A2A method. The 0.3 routes
#: are the same under ``/v1`` (without ListTasks; the extended card is ``/v1/card``).
REST_CALLS: dict[tuple[str, str], str] = {
    ("/message:send", "POST"): "SendMessage",
    ("/message:stream", "POST"): "SendStreamingMessage",
    ("/tasks/{id}:cancel", "POST"): "CancelTask",
    ("/tasks/{id}:subscribe", "GET"): "SubscribeToTask",
    ("/tasks/{id}:subscribe", "POST"): "SubscribeToTask",
    ("/tasks/{id}", "GET"): "GetTask",
    ("/tasks/{id}/pushNotificationConfigs/{push_id}", "GET"): "GetTaskPushNotificationConfig",
    ("/tasks/{id}/pushNotificationConfigs/{push_id}", "DELETE"): (
        "DeleteTaskPushNotificationConfig"
    ),
    ("/tasks/{id}/pushNotificationConfigs", "POST"): "CreateTaskPushNotificationConfig",
    ("/tasks/{id}/pushNotificationConfigs", "GET"): "ListTaskPushNotificationConfigs",
    ("/tasks", "GET"): "ListTasks",
    ("/extendedAgentCard", "GET"): "GetExtendedAgentCard",
}
_REST03_CALLS: dict[tuple[str, str], str] = {
    **{
        ("/v1" + path, verb): method
        for (path, verb), method in REST_CALLS.items()
        if method not in ("ListTasks", "GetExtendedAgentCard")
    },
    ("/v1/card", "GET"): "GetExtendedAgentCard",
    ("/agent/authenticatedExtendedCard", "GET"): "GetExtendedAgentCard",
}
#: JSON-RPC method name -> (A2A 1.0 method name, protocol version of the name); the 1.0
#: names are the REST routes' methods.
JSONRPC_METHODS: dict[str, tuple[str, str]] = {
    **{name: (name, "1.0") for name in REST_CALLS.values()},
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
#: The A2A 1.0 methods that send a message (and may start a task).
MESSAGE_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})
_KINDS: dict[str, Kind] = {
    **dict.fromkeys(CARD_PATHS, "card"),
    JWKS_PATH: "jwks",
    PUSH_STATUS_PATH: "push",
    HEALTH_PATH: "health",
    METRICS_PATH: "metrics",
}

_UNREAD = object()

#: the request being served (set by :class:`Recorder`; read where no scope is at hand,
#: e.g. inside an execution started by the request)
_current: ContextVar[RequestInfo | None] = ContextVar("apcore_a2a_request", default=None)


@dataclass(slots=True)
class RequestInfo:
    """What one HTTP request is to the A2A layers: ``method`` is the A2A 1.0 name whatever
    the binding, ``rpc_method`` the JSON-RPC name as sent; ``version`` is the protocol the
    path or method speaks (else the announced one), ``announced`` the ``A2A-Version``
    sent (``""``: none, which spec §3.6.2 reads as 0.3)."""

    kind: Kind
    http_method: str
    binding: Binding | None = None
    version: str | None = None
    announced: str = ""
    method: str | None = None
    rpc_method: str | None = None
    tenant: str = ""
    body: bytes | None = None
    _payload: Any = field(default=_UNREAD, repr=False)
    parse_error: Exception | None = field(default=None, repr=False)
    #: the body was larger than the limit (what was read of it is gone)
    oversize: bool = False
    #: the client left (or its body deadline passed) before its whole body came: what came
    #: is dropped, however well it parses, as no request was made
    cut: bool = False
    #: the shape limits of the body, and the one it broke (then it is not parsed)
    shape: Shape = field(default_factory=Shape, repr=False)
    shape_error: ShapeError | None = None
    #: an Explorer page or file (a GET or HEAD under the Explorer prefix)
    static_file: bool = False
    #: where this request reached the agent: ``scheme://host:port`` of the listening
    #: socket plus the mount's ``root_path`` (what the card names when no url is set)
    base_url: str = ""
    #: the matched route's template under the agent's root, a tenant as ``{tenant}``
    #: (``/{tenant}/tasks/{id}``): what a metric may name, of a bounded set
    route: str = ""
    #: ``False`` for an A2A route under a reserved segment (``/.well-known/message:send``):
    #: it gets every check an A2A request gets, then 404 -- it is never a tenant
    routable: bool = True
    #: what the call answered (``streams/tap.py``'s ``Answer``), made by the first reader
    answer: Any = field(default=None, repr=False)
    query: bytes = b""  #: the URL's query string as sent (its parameters: :attr:`params`)
    query_items: tuple[tuple[int, str, str], ...] | None = field(default=None, repr=False)
    _delivered: bool = field(default=False, repr=False)

    def again(self, shape: Shape) -> RequestInfo:
        """A fresh record of another request to this record's route, as :func:`describe`
        made it (``dataclasses.replace`` did the same at ten times the cost per request)."""
        return RequestInfo(
            self.kind, self.http_method, self.binding, self.version, method=self.method,
            static_file=self.static_file, shape=shape,
        )  # fmt: skip

    @property
    def params(self) -> tuple[tuple[int, str, str], ...]:
        """The query's ``(pair, name, value)``s (*pair*: its index split at "&"), decoded as
        Starlette decodes them for the SDK, parsed once for every reader of the query."""
        if self.query_items is None:
            each = enumerate(self.query.decode("latin-1").split("&"))
            found = [(i, parse_qsl(text, keep_blank_values=True)) for i, text in each]
            self.query_items = tuple((i, key, value) for i, kept in found for key, value in kept)
        return self.query_items

    @property
    def streaming(self) -> bool:
        return self.method in ("SendStreamingMessage", "SubscribeToTask")

    @property
    def is_a2a(self) -> bool:
        return self.kind == "a2a"

    @property
    def payload(self) -> Any:
        """The body (JSON-RPC or REST), parsed on first use, once for every reader (``None``
        if absent, unparseable or beyond a shape limit; then ``parse_error`` says why)."""
        if self._payload is _UNREAD:
            self._payload = None
            if self.body is not None and self.binding is not None and not self.shape_error:
                try:
                    # Decoded as UTF-8 only (RFC 8259 §8.1): json.loads would guess UTF-16
                    # or UTF-32 from raw bytes, whose shape the scan did not see.
                    text = self.body.decode("utf-8")
                    self._payload = load_json(text)
                except (ValueError, RecursionError) as exc:
                    self.parse_error = exc
                if self.binding == "rest":
                    return self._payload
                doc = self._payload
                name = doc.get("method") if isinstance(doc, dict) else None
                self.rpc_method = name if isinstance(name, str) else None
                known = JSONRPC_METHODS.get(self.rpc_method or "")
                if known is not None:
                    self.method, self.version = known
        return self._payload

    @property
    def request_id(self) -> str | int | None:
        """The JSON-RPC request's id, if it could be read (JSON-RPC 2.0 §5: null otherwise).
        A string id holding an unpaired surrogate (``"\\ud800"`` is valid JSON) cannot be
        written back in a UTF-8 answer: it reads as none, as the request guard answers it."""
        found = self.payload.get("id") if isinstance(self.payload, dict) else None
        if isinstance(found, str):
            try:
                found.encode("utf-8")
            except UnicodeEncodeError:
                return None
        return found if isinstance(found, str | int) and not isinstance(found, bool) else None

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
                self.cut, self.body = True, b""
                return True
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                self.oversize = True
                return False
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        self.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if not utf8_json(self.body):
            return True  # refused as such; its shape is not UTF-8 JSON's to check
        try:
            for _step in scan(self.body, self.shape):
                await asyncio.sleep(0)  # a large body is checked in steps
        except ShapeError as exc:
            self.shape_error = exc
        return True

    def replay(self, receive: Receive) -> Receive:
        """A ``receive`` that hands the loaded body on once (however many layers wrap it)."""
        if self.body is None:
            return receive

        async def replayed() -> Message:
            if not self._delivered and self.body is not None:
                self._delivered = True
                return {"type": "http.request", "body": self.body, "more_body": False}
            return await receive()

        return replayed


def _major_minor(version: str) -> tuple[int, int] | None:
    """The ``Major.Minor`` of *version* (spec §3.6: what names a protocol version; patch
    numbers never count), read as a2a-sdk's check reads a version (``packaging``, so
    ``1.0.1`` and ``1`` are 1.0); ``None`` for no version at all."""
    try:
        parsed = Version(version)
    except ValueError:  # InvalidVersion, or a number of more digits than int() reads
        return None
    return parsed.major, parsed.minor


def version_error(announced: str, spoken: str | None) -> VersionNotSupportedError | None:
    """The refusal of a call announcing *announced* (``A2A-Version``; ``""`` for none, which
    spec §3.6.2 reads as 0.3) to a method of protocol *spoken*; ``None`` when their
    ``Major.Minor`` agree (spec §3.6.2; a2a-sdk's check compares majors alone, and served
    ``1.1`` as 1.0 and ``0.2`` as 0.3), or the method is unknown (its own error follows).
    One rule for every binding: a2a-sdk checks it on HTTP only, its gRPC servicers never."""
    asked = announced or "0.3"
    if spoken is None or asked == spoken or _major_minor(asked) == _major_minor(spoken):
        return None
    told = f"send 'A2A-Version: {spoken}'" if spoken != "0.3" else "send 'A2A-Version: 0.3' or none"
    if not announced:
        reason = "a request without A2A-Version is an A2A 0.3 request (spec §3.6.2)"
    else:
        reason = f"A2A version {echoed(announced, quote=True)} is not supported by this method"
    return VersionNotSupportedError(message=f"{reason}; this method is A2A {spoken}: {told}")


def request_info(scope: Scope) -> RequestInfo | None:
    """The record :class:`Recorder` left in *scope*, if any."""
    info = scope.get(REQUEST_KEY)
    return info if isinstance(info, RequestInfo) else None


def announced_version(scope: Scope, info: RequestInfo) -> str:
    """``A2A-Version`` as *scope* sent it: the header, else the parameter (spec §3.6.1) of the
    query this records on *info*; ``""`` for neither (spec §3.6.2 reads that as 0.3)."""
    info.query = bytes(scope.get("query_string", b""))
    for key, value in scope.get("headers", ()):
        if key == b"a2a-version":
            return bytes(value).decode("latin-1").strip()
    return version_from_param(scope, info.params) or ""


#: The record of the HTTP request being served in this context, if any.
current_request = _current.get


def base_url(scope: Scope) -> str:
    """``scheme://host:port`` of the socket the request came in on (not the ``Host``
    header, which the caller chooses), plus ``root_path``."""
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


def hidden_routes(prefix: str, rpc_path: str = "/") -> list[str]:
    """The agent's own route paths a mount at *prefix* would take over (the path itself
    or one below it): the Explorer there would shadow them or make them public."""
    prefix = prefix.rstrip("/")
    paths = {*_KINDS, *(p for p, _ in REST_CALLS), *(p for p, _ in _REST03_CALLS), rpc_path}
    return sorted(p for p in paths if p == prefix or p.startswith(prefix + "/"))


def describe(
    path: str, verb: str, *, rpc_path: str = "/", explorer_prefix: str | None = None
) -> RequestInfo:
    """What a request to the route with path template *path* and HTTP method *verb* is
    (the JSON-RPC route's method is in the body), before anything is read of it."""
    info = RequestInfo("other", verb)
    verb = "GET" if verb == "HEAD" else verb
    prefix = (explorer_prefix or "").rstrip("/")
    if path in _KINDS:
        info.kind = _KINDS[path]
        if info.kind == "push":
            # A REST route beside A2A's: its errors are answered as theirs (streams/answers.py).
            info.binding, info.version = "rest", "1.0"
    elif prefix and (path == prefix or path.startswith(prefix + "/")):
        info.kind = "explorer"
        info.static_file = verb == "GET"
    elif path == rpc_path:
        info.kind, info.binding = "a2a", "jsonrpc"
    elif (path, verb) in REST_CALLS:
        info.kind, info.binding, info.version = "a2a", "rest", "1.0"
        info.method = REST_CALLS[path, verb]
    elif (path, verb) in _REST03_CALLS:
        info.kind, info.binding, info.version = "a2a", "rest", "0.3"
        info.method = _REST03_CALLS[path, verb]
    return info


def layered(
    routes: Iterable[BaseRoute],
    middleware: Sequence[Middleware] = (),
    *,
    rpc_path: str = "/",
    explorer_prefix: str | None = None,
    shape: Shape = Shape(),
) -> list[BaseRoute]:
    """*routes*, each rebuilt to run :class:`Recorder` then *middleware* once it matched
    (a ``Mount`` of routes: its inner routes; a ``Mount`` of an app: the mount itself)."""
    # First path segments that are never a REST tenant.
    reserved = {".well-known", "health", "metrics", "v1", "agent"}
    reserved |= {p.strip("/").split("/", 1)[0] for p in (rpc_path, explorer_prefix or "")} - {""}

    def stack(path: str, verbs: Iterable[str], tenanted: bool = False) -> list[Middleware]:
        calls = {
            verb: describe(path, verb, rpc_path=rpc_path, explorer_prefix=explorer_prefix)
            for verb in verbs
        }
        record = Middleware(
            Recorder, calls=calls, reserved=frozenset(reserved), tenanted=tenanted, shape=shape
        )
        return [record, *middleware]

    def rebuild(route: BaseRoute, tenanted: bool) -> BaseRoute:
        if isinstance(route, Route):
            return Route(
                route.path,
                route.endpoint,
                methods=route.methods,
                name=route.name,
                include_in_schema=route.include_in_schema,
                middleware=stack(route.path, route.methods or ("GET",), tenanted),
            )
        if isinstance(route, Mount) and route.routes:
            inner = [rebuild(r, tenanted or "{tenant}" in route.path) for r in route.routes]
            # it claims only the paths its routes take: upstream/exact_mounts.py
            return ExactMount(route.path, routes=inner, name=route.name)
        if isinstance(route, Mount):
            verbs = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
            layers = stack(route.path, verbs)
            return Mount(route.path, app=route.app, name=route.name, middleware=layers)
        return route

    return [rebuild(route, False) for route in routes]


@dataclass(slots=True)
class Recorder:
    """Route middleware: the request's :class:`RequestInfo`, from the matched route's call."""

    app: ASGIApp
    #: per HTTP method, what a request is before anything is read of it (:func:`describe`)
    calls: dict[str, RequestInfo]
    reserved: frozenset[str]
    #: a route of the SDK's ``/{tenant}`` mount
    tenanted: bool = False
    shape: Shape = field(default_factory=Shape)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        verb: str = scope["method"]
        known = self.calls.get(verb)  # a GET route's calls name HEAD too
        info = (
            RequestInfo("other", verb, shape=self.shape)
            if known is None
            else known.again(self.shape)
        )
        root = str(scope.get("root_path", ""))
        if self.tenanted:
            tenant = str(scope.get("path_params", {}).get("tenant", ""))
            # The mount added "/<tenant>" to the root path; the agent's root is above it.
            root = root.removesuffix("/" + tenant)
            if tenant in self.reserved:
                info.routable = False
            else:
                info.tenant = tenant
        info.announced = announced_version(scope, info)
        info.version = info.version or info.announced or None  # the route's, else announced
        info.base_url = base_url({**scope, "root_path": root})
        template = str(getattr(scope.get("route"), "path_format", ""))
        info.route = root + ("/{tenant}" if self.tenanted else "") + template
        scope[REQUEST_KEY] = info
        token = _current.set(info)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)
