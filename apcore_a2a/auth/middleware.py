"""Pure-ASGI authentication in front of the A2A routes.

Streaming responses (SSE) pass straight through: the middleware never wraps ``send``, so
it adds no per-event cost, and the identity ContextVar stays set until the response ends.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers

from apcore_a2a.auth.authenticator import Authenticator, InvalidCredentials
from apcore_a2a.server.call_context import IDENTITY_SCOPE_KEY

if TYPE_CHECKING:
    from apcore import Identity
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "EXEMPT_PATHS",
    "EXTENDED_CARD_RPC_METHODS",
    "AuthMiddleware",
    "current_identity",
    "is_extended_card_path",
]

logger = logging.getLogger("apcore_a2a.auth")

#: Reachable without credentials: discovery and operations endpoints, and the public keys
#: push-notification receivers use to verify deliveries.
EXEMPT_PATHS = frozenset(
    {
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
        "/.well-known/jwks.json",
        "/health",
        "/metrics",
    }
)
#: JSON-RPC methods (1.0 and 0.3) that return the authenticated extended card.
EXTENDED_CARD_RPC_METHODS = frozenset(
    {"GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"}
)
# The extended card must require authentication even where anonymous calls are allowed;
# JSON-RPC bodies up to this size are inspected for that method.
_PEEK_LIMIT = 64 * 1024

_identity_var: ContextVar[Identity | None] = ContextVar("apcore_a2a_identity", default=None)


def current_identity() -> Identity | None:
    """The authenticated identity of the request being served, if any."""
    return _identity_var.get()


def is_extended_card_path(path: str) -> bool:
    """REST/legacy paths that serve the extended card (1.0 incl. tenant prefix, 0.3, legacy)."""
    return (
        path == "/extendedAgentCard"
        or path.endswith("/extendedAgentCard")
        or path in ("/v1/card", "/agent/authenticatedExtendedCard")
    )


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def _static_under(path: str, prefix: str) -> bool:
    """*prefix* itself, its index, or a file (``name.ext``) below it.

    Only file-like paths are exempt so that API-shaped paths under the prefix
    (``/explorer/tasks``, which the REST ``/{tenant}`` mount would route to ListTasks if
    the explorer were mounted after it) still require credentials.
    """
    if path in (prefix, prefix + "/"):
        return True
    if not path.startswith(prefix + "/"):
        return False
    last = path.rsplit("/", 1)[-1]
    return "." in last.strip(".") and ":" not in last


def _challenge(authenticator: Authenticator) -> tuple[str, str]:
    """(``WWW-Authenticate`` value, body) for a rejected request."""
    schemes = authenticator.security_schemes().values()
    if any(s.HasField("http_auth_security_scheme") for s in schemes) or not schemes:
        return "Bearer", "Missing or invalid Bearer token"
    return "ApiKey", "Missing or invalid API key"


class AuthMiddleware:
    """Authenticate every request except discovery/ops endpoints.

    On success the apcore ``Identity`` is stored in ``scope[IDENTITY_SCOPE_KEY]`` (the SDK
    call-context builder turns it into the task owner) and in a ContextVar (see
    :func:`current_identity`), which is reset when the request ends. Missing or invalid
    credentials get ``401`` with ``WWW-Authenticate`` and a fixed body; nothing from the
    credential is echoed or logged above DEBUG. With ``require_auth=False`` requests
    *without* credentials pass as anonymous, but bad credentials are still rejected and
    the extended agent card still requires authentication.

    Example::

        app = Starlette(routes=..., middleware=[
            Middleware(AuthMiddleware, authenticator=JWTAuthenticator(key=secret))])
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        require_auth: bool = True,
        exempt_paths: Iterable[str] = EXEMPT_PATHS,
        exempt_get_prefixes: Iterable[str] = (),
        rpc_path: str = "/",
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.require_auth = require_auth
        self.exempt_paths = frozenset(exempt_paths)
        self.exempt_get_prefixes = tuple(p.rstrip("/") for p in exempt_get_prefixes if p)
        self.rpc_path = rpc_path
        challenge, message = _challenge(authenticator)
        self._challenge = challenge.encode("latin-1")
        self._body = message.encode("utf-8")

    def _exempt(self, method: str, path: str) -> bool:
        if path in self.exempt_paths:
            return True
        if method in ("GET", "HEAD"):
            return any(_static_under(path, p) for p in self.exempt_get_prefixes)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # Only this middleware may decide who the caller is.
        scope.pop(IDENTITY_SCOPE_KEY, None)
        method: str = scope.get("method", "GET")
        path = _route_path(scope)
        if self._exempt(method, path):
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.authenticator.authenticate(Headers(scope=scope))
        except InvalidCredentials as exc:
            logger.debug("rejected credentials for %s %s: %s", method, path, exc)
            await self._deny(scope, send)
            return
        if identity is None:
            if self.require_auth or is_extended_card_path(path):
                await self._deny(scope, send)
                return
            if method == "POST" and path == self.rpc_path:
                receive, rpc_method = await _peek_rpc_method(receive)
                if rpc_method in EXTENDED_CARD_RPC_METHODS:
                    await self._deny(scope, send)
                    return
            await self.app(scope, receive, send)
            return
        scope[IDENTITY_SCOPE_KEY] = identity
        token = _identity_var.set(identity)
        try:
            await self.app(scope, receive, send)
        finally:
            _identity_var.reset(token)

    async def _deny(self, scope: Scope, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(self._body)).encode()),
                    (b"www-authenticate", self._challenge),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self._body})


async def _peek_rpc_method(receive: Receive) -> tuple[Receive, str | None]:
    """Read (up to a limit) a JSON-RPC body to learn its method; return a replaying receive."""
    buffered: list[Message] = []
    size = 0
    complete = False
    while size <= _PEEK_LIMIT:
        message = await receive()
        buffered.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            complete = True
            break

    method: str | None = None
    if complete and size <= _PEEK_LIMIT:
        try:
            payload: Any = json.loads(b"".join(m.get("body", b"") for m in buffered))
        except ValueError:
            payload = None
        if isinstance(payload, dict) and isinstance(payload.get("method"), str):
            method = payload["method"]

    async def replay() -> Message:
        if buffered:
            return buffered.pop(0)
        return await receive()

    return replay, method
