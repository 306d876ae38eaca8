"""The answer to a request no route takes: a path the agent does not serve (404), or an
HTTP method its path does not take (405, with ``Allow``); never a redirect.

The agent's router reads a path as spelled (A2A 1.0.1 §11: the HTTP+JSON paths are exact):
Starlette's default answers a path one slash away from a route with a 307 to the other
spelling, which an API client does not follow for a ``POST``, and with the SDK's
``/{tenant}`` mount that was every one-segment typo (``/message:sendx`` to
``/message:sendx/``). :func:`agent_app` turns that off on the agent's own router only; a
host app the agent is mounted in keeps its own. The Explorer's redirect to its page is its
own route, not the router's.

Starlette answers both in ``text/plain``; on the agent's A2A paths they are A2A errors
instead, with the same status and headers: on the REST paths (and every path no binding
defines, since any of them could be a REST call with a tenant) the ``google.rpc.Status``
object of spec §11.6, reason ``METHOD_NOT_FOUND``; on the JSON-RPC path (only a method
other than ``POST`` misses it) the JSON-RPC error object of §9.5, ``-32600`` with a null
``id`` (JSON-RPC 2.0 §5.1: it is no Request object), ``application/json`` as §9.1 says of
every answer there. The Explorer's files and the ops routes (``/health``, ``/metrics``, the
key set) are no A2A path: Starlette's answer stays theirs.

Both are handlers of the agent's own Starlette app (``exception_handlers``): a host app
the agent is mounted in keeps its own answers. :class:`AgentRoot` notes where the agent is
mounted before its own mounts (the REST tenant, the Explorer's files) add to the root path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar

from a2a.utils.errors import InvalidRequestError, MethodNotFoundError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Lifespan, Receive, Scope, Send

from apcore_a2a.classify import (
    HEALTH_PATH,
    JWKS_PATH,
    METRICS_PATH,
    RequestInfo,
    announced_version,
)
from apcore_a2a.edge.refusal import error_document, refusal

Handler = Callable[[Request, Exception], Awaitable[Response]]

#: the ``google.rpc.Code`` name of each status, as gRPC-gateway's routing errors name them
_CODE_NAMES = {404: "NOT_FOUND", 405: "UNIMPLEMENTED"}
_MESSAGES = {404: "Not Found", 405: "Method Not Allowed"}
_RPC_MESSAGE = "Invalid Request: a JSON-RPC call is an HTTP POST"
_NOT_A2A = (HEALTH_PATH, METRICS_PATH, JWKS_PATH)
#: the agent's root path as the request being served entered the agent's app
_agent_root: ContextVar[str] = ContextVar("apcore_a2a_agent_root", default="")


class AgentRoot:
    """App middleware: the root path the request entered the agent with, for the handlers
    of :func:`unrouted_handlers` (Starlette's mounts extend ``root_path`` as they match)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _agent_root.set(str(scope.get("root_path", "")))
        try:
            await self.app(scope, receive, send)
        finally:
            _agent_root.reset(token)


def agent_app(
    routes: Sequence[BaseRoute],
    middleware: Sequence[Middleware],
    lifespan: Lifespan[Starlette],
    rpc_path: str,
    explorer_prefix: str | None,
) -> Starlette:
    """The agent's Starlette app: no slash redirects on its router, and the 404 and 405 of
    :func:`unrouted_handlers`."""
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers=unrouted_handlers(rpc_path, explorer_prefix),
    )
    # Starlette's public switch, on this router alone (not on a host's that mounts us).
    app.router.redirect_slashes = False
    return app


def unrouted_handlers(rpc_path: str, explorer_prefix: str | None) -> dict[int, Handler]:
    """Starlette ``exception_handlers`` for 404 and 405: A2A errors on the A2A paths of an
    agent whose JSON-RPC route is *rpc_path* (and whose Explorer, if served, is under
    *explorer_prefix*), Starlette's own answer elsewhere."""
    explorer = (explorer_prefix or "").rstrip("/")

    def a2a_path(path: str) -> bool:
        if path in _NOT_A2A:
            return False
        return not explorer or not (path == explorer or path.startswith(explorer + "/"))

    async def answer(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException) or exc.status_code not in _MESSAGES:
            raise exc  # pragma: no cover - registered for 404 and 405 only
        status, headers = exc.status_code, dict(exc.headers or {})
        path = _route_path(request)
        if not a2a_path(path):
            return PlainTextResponse(exc.detail, status, headers=headers)
        if path == rpc_path:
            # No body to name a method: the announced version (none: 0.3, spec §3.6.2).
            info = RequestInfo("a2a", request.method, binding="jsonrpc")
            info.version = announced_version(request.scope, info) or "0.3"
            error = InvalidRequestError(message=_RPC_MESSAGE)
            return refusal(info, error, status, headers)
        # One shape for both versions: a2a-sdk answers its 0.3 REST errors in 1.0's.
        info = RequestInfo("a2a", request.method, binding="rest", version="1.0")
        document = error_document(info, MethodNotFoundError(message=_MESSAGES[status]))
        document["error"].update(code=status, status=_CODE_NAMES[status])
        return JSONResponse(document, status, headers=headers)

    return {404: answer, 405: answer}


def _route_path(request: Request) -> str:
    """The path below the agent's mount point (its routes' paths are relative to it)."""
    path: str = request.scope["path"]
    root = _agent_root.get()
    if not root or not path.startswith(root):
        return path
    return path[len(root) :] or "/"
