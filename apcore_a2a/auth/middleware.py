"""Pure-ASGI authentication in front of the A2A routes.

Streaming responses (SSE) pass straight through: the middleware never wraps ``send``, so
it adds no per-event cost, and the identity ContextVar stays set until the response ends.
"""

from __future__ import annotations

from contextvars import ContextVar
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from a2a.utils.error_handlers import build_error_details, build_rest_error_payload
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from apcore_a2a.auth.access import Gate
from apcore_a2a.classify import RequestInfo, request_info
from apcore_a2a.errors import OwnError, PermissionDeniedError, UnauthenticatedError
from apcore_a2a.execution.identity import IDENTITY_SCOPE_KEY
from apcore_a2a.upstream.error_answers import correct_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from apcore import Identity
    from starlette.types import ASGIApp, Receive, Scope, Send

    from apcore_a2a.auth.authenticator import Authenticator

__all__ = ["AuthMiddleware", "current_identity", "needs_credentials"]


_identity_var: ContextVar[Identity | None] = ContextVar("apcore_a2a_identity", default=None)
#: A refused JSON-RPC request's body is read up to this size, for its ``id``; no more is
#: read from a caller the agent does not serve.
_ID_READ_LIMIT = 64 * 1024


def current_identity() -> Identity | None:
    """The authenticated identity of the request being served, if any."""
    return _identity_var.get()


def needs_credentials(info: RequestInfo | None, *, ops_public: bool) -> bool | None:
    """``True``: refuse without credentials; ``False``: public (card, JWKS, Explorer files);
    ``None``: optional, checked when given and served either way (``/health`` answers
    anonymous probes briefly)."""
    if info is None:
        return True
    if info.kind == "metrics":
        return None if ops_public else True
    explorer = not info.static_file
    return {"card": False, "jwks": False, "explorer": explorer, "health": None}.get(info.kind, True)


class AuthMiddleware:
    """Authenticate every request that needs it (see :func:`needs_credentials`).

    On success the apcore ``Identity`` is stored in ``scope[IDENTITY_SCOPE_KEY]`` (the SDK
    call-context builder turns it into the task owner) and in :func:`current_identity`
    until the request ends. Refusals (:class:`~apcore_a2a.auth.access.Gate`: 401, or 403
    without *required_roles* / *required_scopes*) get a fixed body the binding's clients
    parse (a JSON-RPC error with the request's ``id``, else an RFC 9457 problem) and, on
    401, one ``WWW-Authenticate`` challenge per scheme; nothing from the credential is
    echoed or logged (the reason is logged at INFO). With ``require_auth=False`` requests
    *without* credentials pass as anonymous, but bad credentials are still rejected and
    the extended agent card still requires authentication.

    Example::

        auth = Middleware(AuthMiddleware, authenticator=JWTAuthenticator(key=secret))
        app = Starlette(routes=layered(routes, [auth]))  # apcore_a2a.classify.layered
    """

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        require_auth: bool = True,
        ops_public: bool = False,
        max_body_bytes: int = 10 * 1024 * 1024,
        required_roles: Sequence[str] = (),
        required_scopes: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.gate = Gate(authenticator, roles=required_roles, scopes=required_scopes)
        self.require_auth = require_auth
        self.ops_public = ops_public
        self.max_body = max_body_bytes
        self._challenges = [
            (b"www-authenticate", v.encode("latin-1")) for v in self.gate.challenges
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope.pop(IDENTITY_SCOPE_KEY, None)  # only this middleware may say who the caller is
        info = request_info(scope)
        need = needs_credentials(info, ops_public=self.ops_public)
        if need is False:
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.gate.identify(Headers(scope=scope))
            if need:
                anonymous_ok = identity is None and await self._anonymous_ok(info, receive)
                if info is not None and info.is_a2a:  # roles and scopes are for A2A calls
                    self.gate.admit(identity, anonymous_ok=anonymous_ok)
                elif identity is None and not anonymous_ok:
                    raise self.gate.unauthenticated()
        except (UnauthenticatedError, PermissionDeniedError) as exc:
            if need is None:  # optional (a health probe): served, as anonymous
                await self.app(scope, receive, send)
                return
            await self._deny(scope, info, receive, send, exc)
            return
        if info is not None:
            receive = info.replay(receive)  # the body, if we had to read it
        if identity is not None:
            scope[IDENTITY_SCOPE_KEY] = identity
        token = _identity_var.set(identity)
        try:
            await self.app(scope, receive, send)
        finally:
            _identity_var.reset(token)

    async def _anonymous_ok(self, info: RequestInfo | None, receive: Receive) -> bool:
        if info is None or self.require_auth or info.kind == "metrics":
            return False
        # The method of a JSON-RPC call is in its body; the record reads and parses it once,
        # for everyone after us too.
        jsonrpc = info.binding == "jsonrpc" and info.http_method == "POST"
        if jsonrpc and await info.load_body(receive, self.max_body):
            _ = info.payload
        return info.method != "GetExtendedAgentCard"

    async def _deny(
        self,
        scope: Scope,
        info: RequestInfo | None,
        receive: Receive,
        send: Send,
        error: UnauthenticatedError | PermissionDeniedError,
    ) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        status = 401 if isinstance(error, UnauthenticatedError) else 403
        if info is not None and info.binding == "jsonrpc":
            if info.http_method == "POST":
                await info.load_body(receive, min(self.max_body, _ID_READ_LIMIT))
            answer = JSONResponse(_jsonrpc_error(info, error), status)
        else:
            answer = JSONResponse(
                _problem(status, error), status, media_type="application/problem+json"
            )
        if status == 401:
            answer.raw_headers += self._challenges
        await answer(scope, receive, send)


def _jsonrpc_error(info: RequestInfo, error: OwnError) -> dict[str, Any]:
    """A JSON-RPC error response, with the request's id when it could be read (§5.1 of
    JSON-RPC 2.0: null otherwise) and, for 1.0, the ``ErrorInfo`` data the SDK adds."""
    payload = info.payload
    request_id = payload.get("id") if isinstance(payload, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    detail: dict[str, Any] = {"code": error.wire.code, "message": error.message}
    if info.version != "0.3":
        detail["data"] = build_error_details(error)
    return {"jsonrpc": "2.0", "id": request_id, "error": correct_error(detail)}


def _problem(status: int, error: OwnError) -> dict[str, Any]:
    """An RFC 9457 problem (spec §11.6) that also carries the SDK's REST error envelope
    (``error`` with the ``ErrorInfo`` reason), which a2a-sdk's REST client reads."""
    return {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": error.message,
        "error": correct_error(build_rest_error_payload(error)["error"]),
    }
