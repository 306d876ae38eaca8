"""Authentication and access control: credentials (:class:`JWTAuthenticator`,
:class:`APIKeyAuthenticator`) -> apcore ``Identity`` (:class:`AuthMiddleware`) -> task owner
and ACL-filtered cards (:func:`security_for`, :func:`extended_card_modifier`).

The JWT names (:class:`JWTAuthenticator`, :class:`JWKSKeySource`, :class:`ClaimMapping`)
are imported on first use: PyJWT and cryptography cost an agent without JWT auth nothing
at start-up (``docs/operations.md``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from apcore_a2a._lazy import lazy_names
from apcore_a2a.auth.authenticator import (
    AnyAuthenticator,
    APIKeyAuthenticator,
    Authenticator,
    InvalidCredentials,
    identity_from_metadata,
    parse_api_key_entries,
    stamp_identity,
)
from apcore_a2a.auth.cards import (
    LEGACY_EXTENDED_CARD_PATH,
    acl_card_document,
    extended_card_modifier,
    legacy_extended_card_route,
    restrict_card,
    security_for,
)
from apcore_a2a.auth.middleware import (
    AuthMiddleware,
    authenticator_from_settings,
    cors_middleware,
    current_identity,
    needs_credentials,
    security_middleware,
)
from apcore_a2a.errors import WeakKeyError
from apcore_a2a.execution.identity import (
    AUTH_ISSUER_ATTR,
    AUTH_SCHEME_ATTR,
    owner_key,
    visible_modules,
    visible_modules_async,
)

if TYPE_CHECKING:
    from apcore_a2a.auth.jwks import JWKSKeySource
    from apcore_a2a.auth.jwt_authenticator import ClaimMapping, JWTAuthenticator

_JWT = {
    "ClaimMapping": "apcore_a2a.auth.jwt_authenticator",
    "JWTAuthenticator": "apcore_a2a.auth.jwt_authenticator",
    "JWKSKeySource": "apcore_a2a.auth.jwks",
}


__getattr__ = lazy_names(__name__, _JWT, globals())


__all__ = [
    "AUTH_ISSUER_ATTR",
    "AUTH_SCHEME_ATTR",
    "LEGACY_EXTENDED_CARD_PATH",
    "APIKeyAuthenticator",
    "AnyAuthenticator",
    "AuthMiddleware",
    "Authenticator",
    "ClaimMapping",
    "InvalidCredentials",
    "JWKSKeySource",
    "JWTAuthenticator",
    "WeakKeyError",
    "acl_card_document",
    "authenticator_from_settings",
    "cors_middleware",
    "current_identity",
    "extended_card_modifier",
    "identity_from_metadata",
    "legacy_extended_card_route",
    "needs_credentials",
    "owner_key",
    "parse_api_key_entries",
    "restrict_card",
    "security_for",
    "security_middleware",
    "stamp_identity",
    "visible_modules",
    "visible_modules_async",
]
