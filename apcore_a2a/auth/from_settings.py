"""Build the authenticator and the HTTP security middleware (CORS, authentication) from
:class:`Settings`."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from apcore_a2a.auth.authenticator import (
    AnyAuthenticator,
    APIKeyAuthenticator,
    Authenticator,
    parse_api_key_entries,
)
from apcore_a2a.auth.jwt_authenticator import JWTAuthenticator
from apcore_a2a.auth.middleware import AuthMiddleware
from apcore_a2a.settings import SettingsError

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = ["authenticator_from_settings", "cors_middleware", "security_middleware"]

logger = logging.getLogger("apcore_a2a.auth")

CORS_ALLOW_METHODS = ("GET", "POST", "OPTIONS")
#: Authorization/Content-Type plus the A2A protocol headers SDK clients send.
CORS_ALLOW_HEADERS = (
    "Authorization",
    "Content-Type",
    "A2A-Version",
    "A2A-Extensions",
    "X-A2A-Extensions",
    "Last-Event-ID",
)


def _bearer(settings: Settings) -> JWTAuthenticator:
    if settings.auth_key and settings.auth_jwks_url:
        raise SettingsError(
            "give either --auth-key (JWT_KEY) or --auth-jwks-url (JWT_JWKS_URL), not both"
        )
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
    except ValueError as exc:
        raise SettingsError(f"JWT auth: {exc}") from None


def authenticator_from_settings(settings: Settings) -> Authenticator | None:
    """The authenticator the settings ask for, or ``None`` when auth is off.

    ``auth_type="bearer"`` needs a key or JWKS URL; ``"apikey"`` needs ``api_keys``.
    Without ``auth_type``, a JWT key / JWKS URL turns on bearer auth and API keys turn on
    API-key auth; configuring both accepts either credential. Raises
    :class:`~apcore_a2a.settings.SettingsError` for unusable combinations.
    """
    has_bearer = bool(settings.auth_key or settings.auth_jwks_url)
    if settings.auth_type == "bearer" and not has_bearer:
        raise SettingsError(
            "--auth-type bearer requires --auth-key (JWT_KEY) or --auth-jwks-url (JWT_JWKS_URL)"
        )
    if settings.auth_type == "apikey" and not settings.api_keys:
        raise SettingsError("--auth-type apikey requires at least one --api-key (A2A_API_KEYS)")
    members: list[Authenticator] = []
    if has_bearer and settings.auth_type in (None, "bearer"):
        members.append(_bearer(settings))
    if settings.api_keys:
        try:
            members.append(APIKeyAuthenticator(parse_api_key_entries(settings.api_keys)))
        except ValueError as exc:
            raise SettingsError(f"API keys: {exc}") from None
    if not members:
        if settings.required_roles or settings.required_scopes:
            raise SettingsError(
                "--required-roles and --required-scopes need authentication: give "
                "--auth-key, --auth-jwks-url or --api-key"
            )
        return None
    return members[0] if len(members) == 1 else AnyAuthenticator(members)


def security_middleware(
    settings: Settings, authenticator: Authenticator | None
) -> tuple[Middleware | None, Middleware | None]:
    """``(CORS, authentication)`` middleware entries; CORS goes outermost."""
    members = (
        authenticator.authenticators
        if isinstance(authenticator, AnyAuthenticator)
        else (authenticator,)
    )
    extra_headers = [a.header for a in members if isinstance(a, APIKeyAuthenticator)]
    cors = cors_middleware(settings.cors_origins, extra_headers=extra_headers)
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
    """A Starlette ``CORSMiddleware`` entry for *origins*, or ``None`` when the list is empty.

    Put it outermost (before authentication) so preflight requests are answered without
    credentials and 401 responses still carry CORS headers. ``*`` is allowed but logged
    at WARNING. Credentials (cookies) are never allowed; tokens travel in headers.
    *extra_headers* adds request headers to allow, e.g. an API key header.
    """
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
        allow_methods=list(CORS_ALLOW_METHODS),
        allow_headers=list(dict.fromkeys([*CORS_ALLOW_HEADERS, *extra_headers])),
        allow_credentials=False,
        expose_headers=["WWW-Authenticate", "ETag"],
        max_age=600,
    )
