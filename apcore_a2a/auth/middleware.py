"""Pure-ASGI authentication in front of the A2A routes, CORS, and how settings build both.

Streaming responses (SSE) pass straight through: the middleware never wraps ``send``, so
it adds no per-event cost, and the identity ContextVar stays set until the response ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from apcore_a2a.auth.authenticator import (
    SCOPES_ATTR,
    AnyAuthenticator,
    APIKeyAuthenticator,
    Authenticator,
    Gate,
    parse_api_key_entries,
    words,
)
from apcore_a2a.classify import RequestInfo, request_info
from apcore_a2a.edge.refusal import refusal
from apcore_a2a.errors import PermissionDeniedError, UnauthenticatedError, WeakKeyError
from apcore_a2a.execution.identity import Caller, CallerCredentials
from apcore_a2a.settings import SPECS, SettingRefusal, SettingsError, forms

if TYPE_CHECKING:
    from apcore import Identity
    from starlette.types import ASGIApp, Receive, Scope, Send

    from apcore_a2a.auth.jwt_authenticator import JWTAuthenticator
    from apcore_a2a.settings import Settings

logger = logging.getLogger("apcore_a2a.auth")

_identity_var: ContextVar[Identity | None] = ContextVar("apcore_a2a_identity", default=None)
#: A refused JSON-RPC request's body is read up to this size and for at most this many
#: seconds, for its ``id``; no more is read, nor waited for, from a caller the agent does
#: not serve (a body sent slowly, or never, would hold the connection).
_ID_READ_LIMIT = 64 * 1024
_ID_READ_SECONDS = 1.0


def current_identity() -> Identity | None:
    """The authenticated identity of the request being served, if any."""
    return _identity_var.get()


def identify_task(identity: Identity | None) -> None:
    """Make *identity* what :func:`current_identity` answers in the rest of the current
    asyncio task (the gRPC interceptor's, for the call it admitted: grpc.aio serves each
    call in a task of its own, which ends with the call)."""
    _identity_var.set(identity)


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

    The caller goes to ``scope["user"]`` and ``scope["auth"]`` (where a2a-sdk's own
    call-context builder finds the task owner and the identity) and to
    :func:`current_identity` until the request ends. Refusals
    (:class:`~apcore_a2a.auth.authenticator.Gate`) get the fixed answers of docs/auth.md
    ("What callers see"). With ``require_auth=False`` requests *without* credentials pass as
    anonymous, but bad credentials and anonymous extended-card requests are still refused.

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
        max_body_bytes: int = 1024 * 1024,
        required_roles: Sequence[str] = (),
        required_scopes: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.gate = Gate(
            authenticator, roles=required_roles, scopes=required_scopes, require_auth=require_auth
        )
        self.ops_public = ops_public
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # only this middleware may say who the caller is
        scope.pop("user", None)
        scope.pop("auth", None)
        info = request_info(scope)
        need = needs_credentials(info, ops_public=self.ops_public)
        if need is False:
            await self.app(scope, receive, send)
            return
        try:
            identity = await self.gate.identify(Headers(scope=scope))
            if need:
                anonymous_ok = identity is None and await self._anonymous_ok(info, receive)
                if info is not None and (info.is_a2a or info.kind in ("metrics", "push")):
                    # roles and scopes: A2A calls, the push status beside them, and the
                    # figures about them
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
            scope["user"] = Caller(identity)
            scope["auth"] = CallerCredentials(identity, words(identity.attrs.get(SCOPES_ATTR)))
        token = _identity_var.set(identity)
        try:
            await self.app(scope, receive, send)
        finally:
            _identity_var.reset(token)

    async def _anonymous_ok(self, info: RequestInfo | None, receive: Receive) -> bool:
        if info is None or self.gate.require_auth or info.kind == "metrics":
            return False
        # The method of a JSON-RPC call is in its body; the record reads and parses it once,
        # for everyone after us too.
        jsonrpc = info.binding == "jsonrpc" and info.http_method == "POST"
        if jsonrpc and await info.load_body(receive, self.max_body):
            _ = info.payload
        return self.gate.anonymous_ok(info.method)

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
                with contextlib.suppress(TimeoutError):  # then answered without the id
                    async with asyncio.timeout(_ID_READ_SECONDS):
                        await info.load_body(receive, min(self.max_body, _ID_READ_LIMIT))
            answer = refusal(info, error, status)
        else:
            # REST, and the routes beside it (metrics, push status, the Explorer's calls):
            # spec §11.6's error object, a google.rpc.Status with the ErrorInfo reason, and
            # nothing else (a2a-sdk answers 0.3 REST errors in the same shape).
            method = info.http_method if info is not None else str(scope.get("method", "GET"))
            answer = refusal(RequestInfo("other", method, binding="rest"), error, status)
        if status == 401:
            answer.raw_headers += [(b"www-authenticate", v.encode()) for v in self.gate.challenges]
        await answer(scope, receive, send)


#: Authorization/Content-Type plus the A2A protocol headers SDK clients send.
CORS_ALLOW_HEADERS = (
    "Authorization",
    "Content-Type",
    "A2A-Version",
    "A2A-Extensions",
    "X-A2A-Extensions",
    "Last-Event-ID",
)


def _forms(*names: str) -> str:
    """Where to give the settings *names* (every form: the file ones are those secrets
    should use), as a message lists them."""
    *others, last = [forms(SPECS[name]) for name in names]
    return f"{', '.join(others)} or {last}" if others else last


def _bearer(settings: Settings) -> JWTAuthenticator:
    # PyJWT and cryptography are imported once JWT auth is chosen (start-up cost)
    from apcore_a2a.auth.jwt_authenticator import JWTAuthenticator

    if settings.auth_key and settings.auth_jwks_url:
        raise SettingsError(f"give either {_forms('auth_key', 'auth_jwks_url')}, not both")
    try:
        return JWTAuthenticator(
            settings.auth_key or None,
            jwks_url=settings.auth_jwks_url or None,
            algorithms=settings.auth_algorithms or None,
            audience=settings.auth_audience or None,
            issuer=settings.auth_issuer or None,
            require_exp=settings.auth_require_exp,
            max_lifetime=settings.auth_max_token_lifetime,
            jwks_cache_seconds=settings.auth_jwks_cache_seconds,
            jwks_refresh_cooldown=settings.auth_jwks_refresh_cooldown,
            jwks_timeout=settings.auth_jwks_timeout,
            jwks_unknown_kid_seconds=settings.auth_jwks_unknown_kid_seconds,
            jwks_backoff_max=settings.auth_jwks_backoff_max,
        )
    except WeakKeyError:
        raise  # about the secret alone: the caller names where it came from
    except ValueError as exc:
        raise SettingsError(f"JWT auth: {exc}") from None


def authenticator_from_settings(settings: Settings) -> Authenticator | None:
    """The authenticator the settings ask for (JWT, API keys or either), or ``None`` when
    auth is off; :class:`~apcore_a2a.settings.SettingsError` for unusable combinations,
    :class:`~apcore_a2a.auth.WeakKeyError` for an HMAC secret too short for its algorithms."""
    has_bearer = bool(settings.auth_key or settings.auth_jwks_url)
    if settings.auth_type == "bearer" and not has_bearer:
        needs = f"requires {_forms('auth_key', 'auth_jwks_url')}"
        raise SettingRefusal("auth_type", needs, settings.auth_type)
    if settings.auth_type == "apikey" and not settings.api_keys:
        needs = f"requires at least one {_forms('api_keys')}"
        raise SettingRefusal("auth_type", needs, settings.auth_type)
    members: list[Authenticator] = []
    if has_bearer and settings.auth_type in (None, "bearer"):
        members.append(_bearer(settings))
    if settings.api_keys:
        try:
            members.append(APIKeyAuthenticator(parse_api_key_entries(settings.api_keys)))
        except ValueError as exc:
            raise SettingRefusal("api_keys", str(exc), None, secret=True) from None
    if not members:
        name = "required_roles" if settings.required_roles else "required_scopes"
        if getattr(settings, name):
            needs = "requires authentication: give " + _forms(
                "auth_key", "auth_jwks_url", "api_keys"
            )
            raise SettingRefusal(name, needs, list(getattr(settings, name)))
        return None
    return members[0] if len(members) == 1 else AnyAuthenticator(members)


def security_middleware(
    settings: Settings, authenticator: Authenticator | None
) -> tuple[Middleware | None, Middleware | None]:
    """``(CORS, authentication)`` middleware entries; CORS goes outermost."""
    schemes = authenticator.security_schemes().values() if authenticator is not None else ()
    api_keys = [
        s.api_key_security_scheme.name for s in schemes if s.HasField("api_key_security_scheme")
    ]
    cors = cors_middleware(settings.cors_origins, extra_headers=api_keys)
    if authenticator is None:
        return cors, None
    return cors, Middleware(
        AuthMiddleware,
        authenticator=authenticator,
        require_auth=settings.require_auth,
        ops_public=settings.ops_details_public,
        max_body_bytes=settings.max_body_bytes,
        required_roles=settings.required_roles,
        required_scopes=settings.required_scopes,
    )


def cors_middleware(
    origins: Sequence[str], *, extra_headers: Iterable[str] = ()
) -> Middleware | None:
    """A Starlette ``CORSMiddleware`` entry for *origins* (``None`` without), allowing
    *extra_headers* too (e.g. an API key header). Put it outermost, so preflights need no
    credentials and 401s carry CORS headers. Cookies are never allowed (tokens travel in
    headers); ``*`` is logged at WARNING."""
    allowed = [o.strip().rstrip("/") for o in origins if o and o.strip()]
    if not allowed:
        return None
    if "*" in allowed:
        logger.warning(
            "CORS allows any origin ('*'); any web page can call this agent from a browser"
        )
        allowed = ["*"]
    return Middleware(
        CORSMiddleware,
        allow_origins=allowed,
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=list(dict.fromkeys([*CORS_ALLOW_HEADERS, *extra_headers])),
        allow_credentials=False,
        expose_headers=["WWW-Authenticate", "ETag"],
        max_age=600,
    )
