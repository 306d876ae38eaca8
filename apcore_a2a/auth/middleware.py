"""Pure-ASGI authentication in front of the A2A routes.

Which requests need credentials is read from the request record of
:mod:`apcore_a2a.classify`: the card and JWKS are public, the Explorer's static files too,
``/health`` answers everyone (details only for authenticated callers), ``/metrics`` and
every A2A call need credentials (unless anonymous calls are allowed), and the extended
card always does.

Streaming responses (SSE) pass straight through: the middleware never wraps ``send``, so
it adds no per-event cost, and the identity ContextVar stays set until the response ends.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING

from starlette.datastructures import Headers

from apcore_a2a.adapters.errors import clean_for_log
from apcore_a2a.auth.authenticator import Authenticator, InvalidCredentials
from apcore_a2a.classify import RequestInfo, Routes, request_info
from apcore_a2a.execution.identity import IDENTITY_SCOPE_KEY

if TYPE_CHECKING:
    from apcore import Identity
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AuthMiddleware", "current_identity", "needs_credentials"]

logger = logging.getLogger("apcore_a2a.auth")

_identity_var: ContextVar[Identity | None] = ContextVar("apcore_a2a_identity", default=None)
_DEFAULT_ROUTES = Routes()


def current_identity() -> Identity | None:
    """The authenticated identity of the request being served, if any."""
    return _identity_var.get()


def needs_credentials(info: RequestInfo | None, *, ops_public: bool) -> bool | None:
    """``True``: refuse without credentials; ``False``: public; ``None``: optional.

    Optional means credentials are checked when given (a bad one is refused) and the
    request is served either way (``/health`` answers anonymous probes briefly).
    """
    if info is None:
        return True
    kind = info.kind
    if kind in ("card", "jwks"):
        return False
    if kind == "explorer":
        return not info.static_file
    if kind == "health":
        return None
    if kind == "metrics":
        return None if ops_public else True
    return True


def _challenge(authenticator: Authenticator) -> tuple[str, str]:
    """(``WWW-Authenticate`` value, body) for a rejected request."""
    schemes = authenticator.security_schemes().values()
    if any(s.HasField("http_auth_security_scheme") for s in schemes) or not schemes:
        return "Bearer", "Missing or invalid Bearer token"
    return "ApiKey", "Missing or invalid API key"


class AuthMiddleware:
    """Authenticate every request that needs it (see :func:`needs_credentials`).

    On success the apcore ``Identity`` is stored in ``scope[IDENTITY_SCOPE_KEY]`` (the SDK
    call-context builder turns it into the task owner) and in a ContextVar (see
    :func:`current_identity`), which is reset when the request ends. Missing or invalid
    credentials get ``401`` with ``WWW-Authenticate`` and a fixed body; nothing from the
    credential is echoed or logged above DEBUG. With ``require_auth=False`` A2A requests
    *without* credentials pass as anonymous, but bad credentials are still rejected and
    the extended agent card still requires authentication.

    Example::

        app = Starlette(routes=..., middleware=[
            Middleware(Classifier, routes=Routes()),
            Middleware(AuthMiddleware, authenticator=JWTAuthenticator(key=secret))])
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        require_auth: bool = True,
        ops_public: bool = False,
        max_body_bytes: int = 10 * 1024 * 1024,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.require_auth = require_auth
        self.ops_public = ops_public
        self.max_body = max_body_bytes
        challenge, message = _challenge(authenticator)
        self._challenge = challenge.encode("latin-1")
        self._body = message.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # Only this middleware may decide who the caller is.
        scope.pop(IDENTITY_SCOPE_KEY, None)
        # Behind the agent's classifier the record is there; used on its own, classify here.
        info = request_info(scope) or _DEFAULT_ROUTES.classify(scope)
        need = needs_credentials(info, ops_public=self.ops_public)
        if need is False:
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.authenticator.authenticate(Headers(scope=scope))
        except InvalidCredentials as exc:
            # The reason, never the credential: exceptions here name what failed, not the token.
            logger.info(
                "refused credentials for %s %s: %s",
                scope.get("method", "WEBSOCKET"),
                clean_for_log(str(scope.get("path", "")), 200),
                clean_for_log(str(exc), 300),
            )
            if need is None:  # optional (a health probe): served, as anonymous
                await self.app(scope, receive, send)
                return
            await self._deny(scope, send)
            return
        if identity is None and need and await self._must_authenticate(info, receive):
            await self._deny(scope, send)
            return
        if info is not None:
            receive = info.replay(receive)  # the body, if we had to read it
        if identity is None:
            await self.app(scope, receive, send)
            return
        scope[IDENTITY_SCOPE_KEY] = identity
        token = _identity_var.set(identity)
        try:
            await self.app(scope, receive, send)
        finally:
            _identity_var.reset(token)

    async def _must_authenticate(self, info: RequestInfo | None, receive: Receive) -> bool:
        if info is None or self.require_auth or info.kind == "metrics":
            return True
        # The method of a JSON-RPC call is in its body; the record reads and parses it once,
        # for everyone after us too.
        jsonrpc = info.binding == "jsonrpc" and info.http_method == "POST"
        if jsonrpc and await info.load_body(receive, self.max_body):
            _ = info.payload
        return info.method == "GetExtendedAgentCard"

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
