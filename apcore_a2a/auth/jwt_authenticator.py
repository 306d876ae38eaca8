"""Bearer JWT authentication with PyJWT: a static key or a JWKS endpoint with key rotation,
and the mapping of verified claims onto an apcore ``Identity``."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jwt
from a2a.types import HTTPAuthSecurityScheme, SecurityScheme
from apcore import Identity
from cachetools import TLRUCache
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from cryptography.x509 import load_pem_x509_certificate

from apcore_a2a.auth.authenticator import (
    SCOPES_ATTR,
    InvalidCredentials,
    header_value,
    remembered,
    stamp_identity,
    words,
)
from apcore_a2a.auth.jwks import JWKSKeySource
from apcore_a2a.errors import WeakKeyError
from apcore_a2a.execution.identity import AUTH_ISSUER_ATTR, AUTH_SCHEME_ATTR, reserved_type

_HMAC = ("HS256", "HS384", "HS512")
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = ("ES256", "ES384", "ES512")
_OKP = ("EdDSA",)
_CURVE_ALG = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
#: ``auth_scheme`` of JWT identities (tasks owned by ``jwt:<issuer tag>:<sub>``).
JWT_SCHEME = "jwt"
_MISSING = object()


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    """Exact name first (namespaced claims like ``https://example.com/roles`` hold dots),
    then a dotted path (``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    node: Any = claims
    for part in name.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimMapping:
    """Which claims (names or dotted paths) become ``Identity.id``, ``type``, ``roles`` (a
    list or a space-separated string) and ``attrs``; the first of the ``scopes`` claims
    present (``scope`` of RFC 9068, else ``scp``) becomes ``attrs["scopes"]``.

    Example::

        ClaimMapping(roles="realm_access.roles", attrs=("email", "tenant"))
    """

    id: str = "sub"
    type: str = "type"
    roles: str = "roles"
    attrs: tuple[str, ...] = ()
    default_type: str = "user"
    scopes: tuple[str, ...] = ("scope", "scp")

    def __post_init__(self) -> None:
        if reserved_type(self.default_type):
            raise ValueError(f"default_type {self.default_type!r} is reserved by apcore")
        # Set by the authenticator: a claim of that name must not stand in for them.
        taken = [n for n in self.attrs if n in (SCOPES_ATTR, AUTH_SCHEME_ATTR, AUTH_ISSUER_ATTR)]
        if taken:
            raise ValueError(
                f"ClaimMapping attrs may not name {taken[0]!r}, an attribute the "
                "authenticator sets (the scopes claims: scopes=(...))"
            )

    def to_identity(self, claims: Mapping[str, Any]) -> Identity | None:
        """Build the identity, or ``None`` when the id claim is missing or not a string."""
        ident = _claim(claims, self.id)
        if not isinstance(ident, str) or not ident:
            return None
        kind = _claim(claims, self.type)
        if not isinstance(kind, str) or not kind:
            kind = self.default_type
        granted = [v for v in (_claim(claims, n) for n in self.scopes) if v is not _MISSING]
        attrs: dict[str, Any] = {SCOPES_ATTR: words(granted[0])} if granted else {}
        attrs.update((n, v) for n in self.attrs if (v := _claim(claims, n)) is not _MISSING)
        return Identity(id=ident, type=kind, roles=words(_claim(claims, self.roles)), attrs=attrs)


def _pem_key(data: bytes) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    """(public key, allowed algorithms, default algorithms) of a PEM public key, certificate
    or private key (of which only the public half is kept)."""
    if b"CERTIFICATE" in data:
        key: Any = load_pem_x509_certificate(data).public_key()
    elif b"PRIVATE KEY" in data:
        key = load_pem_private_key(data, password=None).public_key()
    else:
        key = load_pem_public_key(data)
    if isinstance(key, rsa.RSAPublicKey):
        return key, _RSA, ("RS256",)
    if isinstance(key, ec.EllipticCurvePublicKey):
        alg = _CURVE_ALG.get(key.curve.name)
        if alg is None:
            raise ValueError(f"unsupported EC curve {key.curve.name}")
        return key, (alg,), (alg,)
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return key, _OKP, _OKP
    raise ValueError(f"unsupported JWT verification key type {type(key).__name__}")


class JWTAuthenticator:
    """Verify ``Authorization: Bearer <jwt>`` and map its claims to an apcore ``Identity``.

    Give either *key* (an HMAC secret, or a PEM public key / certificate) or *jwks_url*
    (keys by the token's ``kid`` from a :class:`~apcore_a2a.auth.JWKSKeySource`, tuned by
    the ``jwks_*`` arguments). docs/auth.md ("How tokens are checked") has the rules: the
    algorithm allow-list never mixes HMAC with public-key algorithms, ``exp`` is required
    unless *require_exp* is false, *max_lifetime* (seconds, 0 = none) caps how far ahead it
    may be, and verified tokens are remembered by SHA-256 (``verified_cache_size=0``: off).
    Identities are stamped ``auth_scheme="jwt"`` and ``auth_issuer`` (see
    :func:`~apcore_a2a.auth.owner_key`).

    Example::

        auth = JWTAuthenticator(jwks_url="https://idp.example.com/.well-known/jwks.json",
                                audience="my-agent", issuer="https://idp.example.com/")
    """

    def __init__(
        self,
        key: str | bytes | None = None,
        *,
        jwks_url: str | None = None,
        algorithms: Sequence[str] | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | Sequence[str] | None = None,
        leeway: float = 0,
        claim_mapping: ClaimMapping | None = None,
        require_claims: Sequence[str] = ("sub",),
        require_exp: bool = True,
        max_lifetime: float = 0,
        max_token_bytes: int = 8192,
        jwks_cache_seconds: float = 300,
        jwks_refresh_cooldown: float = 30,
        jwks_timeout: float = 10,
        jwks_unknown_kid_seconds: float = 60,
        jwks_backoff_max: float = 60,
        verified_cache_size: int = 1024,
        verified_cache_seconds: float = 60,
    ) -> None:
        if (key is None) == (jwks_url is None):
            raise ValueError("JWTAuthenticator needs exactly one of key= or jwks_url=")
        self.audience = audience
        self.issuer = list(issuer) if isinstance(issuer, list | tuple) else issuer
        self.leeway = leeway
        self.claim_mapping = claim_mapping or ClaimMapping()
        self.require_claims = list(require_claims)
        if require_exp and "exp" not in self.require_claims:
            self.require_claims.append("exp")
        self.max_lifetime = max_lifetime
        self.max_token_bytes = max_token_bytes
        self._verified_seconds = verified_cache_seconds
        # Each entry lives until its own deadline: min(now + max age, exp + leeway).
        self._verified: TLRUCache[bytes, tuple[float, Callable[[], Identity]]] | None = (
            TLRUCache(verified_cache_size, ttu=lambda _k, value, _now: value[0], timer=time.time)
            if verified_cache_size > 0 and verified_cache_seconds > 0
            else None
        )
        self._key: Any = None
        #: The JWKS key source (``None`` with a static key).
        self.jwks: JWKSKeySource | None = None

        requested = tuple(algorithms or ())
        if "none" in (a.lower() for a in requested):
            raise ValueError("the 'none' JWT algorithm is never accepted")
        data = key.encode() if isinstance(key, str) else key
        if jwks_url is not None:
            allowed: tuple[str, ...] = _RSA + _EC + _OKP
            defaults: tuple[str, ...] = ("RS256", "ES256")
            self.jwks = JWKSKeySource(
                jwks_url,
                cache_seconds=jwks_cache_seconds,
                refresh_cooldown=jwks_refresh_cooldown,
                timeout=jwks_timeout,
                unknown_kid_seconds=jwks_unknown_kid_seconds,
                backoff_max=jwks_backoff_max,
            )
        elif data and b"-----BEGIN" in data:
            self._key, allowed, defaults = _pem_key(data)
        elif data:
            allowed, defaults = _HMAC, ("HS256",)
            self._key = key
        else:
            raise ValueError("the JWT key must not be empty")
        self.algorithms: list[str] = list(requested or defaults)
        wrong = [a for a in self.algorithms if a not in allowed]
        if wrong:
            kind = "a JWKS URL" if jwks_url else "this key"
            raise ValueError(
                f"JWT algorithm(s) {', '.join(wrong)} cannot be used with {kind}; "
                f"allowed: {', '.join(allowed)}"
            )
        if isinstance(self._key, str | bytes) and data:
            # The largest hash allowed decides: a token of that algorithm is as easy to
            # forge as its key is short, whatever the other algorithms need.
            strongest = max(self.algorithms, key=lambda alg: int(alg[2:]))
            needed = int(strongest[2:]) // 8
            if len(data) < needed:
                raise WeakKeyError(
                    f"JWT HMAC secret is {len(data)} bytes; {strongest} needs at least "
                    f"{needed} (RFC 7518 3.2; make one with: openssl rand -base64 48)"
                )

    def security_schemes(self) -> dict[str, SecurityScheme]:
        """``{"bearer": HTTP Bearer (JWT)}``."""
        return {
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="JWT",
                    description="JWT in the Authorization header",
                )
            )
        }

    async def authenticate(self, headers: Mapping[str, str]) -> Identity | None:
        """Verify the bearer token; see :class:`~apcore_a2a.auth.Authenticator`."""
        value = header_value(headers, "authorization")
        if value is None:
            return None
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise InvalidCredentials("Authorization header is not a Bearer token")
        if len(token) > self.max_token_bytes:
            raise InvalidCredentials(f"token longer than {self.max_token_bytes} bytes")
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        hit = self._verified.get(digest) if self._verified is not None else None
        if hit is not None:
            return hit[1]()  # a copy: a module changing it changes no later request
        claims = self.decode(token, await self._verification_key(token))
        identity = self.claim_mapping.to_identity(claims)
        if identity is None:
            raise InvalidCredentials(f"claim {self.claim_mapping.id!r} missing or not a string")
        issuer = claims.get("iss")
        identity = stamp_identity(identity, JWT_SCHEME, issuer if isinstance(issuer, str) else None)
        if self._verified is not None:
            until = time.time() + self._verified_seconds
            exp = claims.get("exp")
            # Compared, never converted: a JSON integer can be too large for a float.
            if isinstance(exp, int | float) and exp < until - self.leeway:
                until = exp + self.leeway
            self._verified[digest] = (until, remembered(identity))
        return identity

    def decode(self, token: str, key: Any) -> dict[str, Any]:
        """Verify signature and registered claims; raise :class:`InvalidCredentials`."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": self.require_claims},
            )
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            # PyJWTError covers bad tokens and unusable keys; the others guard against
            # malformed input slipping through a crypto backend unwrapped.
            raise InvalidCredentials(f"{type(exc).__name__}: {exc}") from None
        if self.max_lifetime:
            exp = claims.get("exp")
            latest = time.time() + self.max_lifetime + self.leeway
            if not isinstance(exp, int | float) or exp > latest:
                raise InvalidCredentials(
                    f"token expires more than {self.max_lifetime:g} s ahead (the maximum)"
                )
        return claims

    async def _verification_key(self, token: str) -> Any:
        if self.jwks is None:
            return self._key
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidCredentials(f"{type(exc).__name__}: {exc}") from None
        kid, alg = header.get("kid"), header.get("alg")
        if not isinstance(kid, str) or not kid:
            raise InvalidCredentials("token has no 'kid' header; required with a JWKS URL")
        if alg not in self.algorithms:
            raise InvalidCredentials(f"token algorithm {str(alg)[:20]!r} is not allowed")
        # The key is bound to the token's algorithm only once it is one we allow.
        return await self.jwks.get(kid, alg)

    async def aclose(self) -> None:
        """Cancel a JWKS fetch in flight (called when the server stops)."""
        if self.jwks is not None:
            await self.jwks.aclose()
